"""POST /v1/images/edits through the official `openai` client and raw multipart, and /v1/generate's init_image,
against the real server with the built-in model (tests/conftest.py `live_service`: 64..128 pixel sides)."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import httpx
import openai
import pytest
from PIL import Image

from tests.app.live_server import LiveServer

PATH = "/v1/images/edits"


def sdk(url: str) -> openai.OpenAI:
    # No retries: a 4xx must show here, not be retried away.
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused-without-sign-in", max_retries=0, timeout=120)


def encoded(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def picture(size: tuple[int, int] = (96, 96)) -> bytes:
    """A picture with structure (a gradient and a square), so that edits of it can be told apart."""
    image = Image.linear_gradient("L").resize(size).convert("RGB")
    image.paste((200, 30, 30), (size[0] // 4, size[1] // 4, size[0] // 2, size[1] // 2))
    return encoded(image)


def hole_mask(size: tuple[int, int] = (96, 96)) -> bytes:
    """OpenAI's mask: opaque everywhere but a transparent square (the part to repaint)."""
    mask = Image.new("RGBA", size, (0, 0, 0, 255))
    mask.paste((0, 0, 0, 0), (0, 0, size[0] // 2, size[1] // 2))
    return encoded(mask)


def bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header that declares width x height pixels, with a few bytes of data: small on the wire,
    huge once decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def png_of(b64: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert image.format == "PNG"
    return image


def test_the_sdk_edits_an_image_to_the_asked_size(live_service: LiveServer):
    answer = sdk(live_service.url).images.edit(
        image=("photo.png", picture(), "image/png"),
        prompt="the same scene at night",
        size="64x128",
        response_format="b64_json",
        extra_body={"strength": 0.5, "steps": 4, "seed": 3},
    )
    assert answer.data is not None and len(answer.data) == 1
    assert png_of(answer.data[0].b64_json).size == (64, 128)
    assert answer.size == "64x128"


def test_the_sdk_inpaints_with_a_mask_and_n_images(live_service: LiveServer):
    answer = sdk(live_service.url).images.edit(
        image=("photo.png", picture(), "image/png"),
        mask=("mask.png", hole_mask(), "image/png"),
        prompt="a window",
        n=2,
        size="96x96",
        extra_body={"steps": 2, "seed": 5},
    )
    first, second = (png_of(item.b64_json) for item in answer.data)
    assert first.size == second.size == (96, 96)
    assert first.tobytes() != second.tobytes()  # seeds 5 and 6


def test_the_mask_keeps_what_it_covers(live_service: LiveServer):
    # diffusers' inpainting pipelines repaint the whole image in latent space; where the mask is opaque the
    # result stays near the original, where it is transparent it is redrawn: the two halves must differ in how
    # far they moved (measured here: the kept half moves far less than the repainted one).
    source = Image.open(io.BytesIO(picture()))
    answer = sdk(live_service.url).images.edit(
        image=("photo.png", picture(), "image/png"),
        mask=("mask.png", hole_mask(), "image/png"),
        prompt="a window",
        size="96x96",
        extra_body={"steps": 4, "seed": 1, "strength": 1.0},
    )
    result = png_of(answer.data[0].b64_json).convert("RGB")

    def moved(box: tuple[int, int, int, int]) -> float:
        a, b = source.crop(box).tobytes(), result.crop(box).tobytes()
        return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)

    assert moved((0, 0, 48, 48)) > moved((48, 48, 96, 96))


def test_strength_and_the_image_change_the_result(live_service: LiveServer):
    def edit(image: bytes, strength: float) -> bytes:
        answer = sdk(live_service.url).images.edit(
            image=("photo.png", image, "image/png"),
            prompt="a fox",
            size="64x64",
            extra_body={"steps": 4, "seed": 9, "strength": strength},
        )
        return png_of(answer.data[0].b64_json).tobytes()

    base = edit(picture(), 0.5)
    assert base != edit(picture(), 1.0)
    assert base != edit(encoded(Image.new("RGB", (96, 96), (0, 90, 200))), 0.5)


@pytest.mark.parametrize(
    ("files", "param", "words"),
    [
        ({"image": ("notes.txt", b"not an image at all", "text/plain")}, "image", "not a PNG, JPEG or WebP"),
        ({"image": ("a.gif", encoded(Image.new("RGB", (64, 64)), "GIF"), "image/gif")}, "image", "not a PNG, JPEG"),
        ({"image": ("bomb.png", bomb_png(5000, 5000), "image/png")}, "image", "5000x5000 pixels; the limit is"),
        ({"image": ("bomb.png", bomb_png(60000, 60000), "image/png")}, "image", "more pixels than the limit"),
        (
            {"image": ("a.png", picture(), "image/png"), "mask": ("m.png", hole_mask((64, 64)), "image/png")},
            "mask",
            "must be the same size",
        ),
        ({"image": ("cut.png", picture()[:200], "image/png")}, "image", "could not be decoded"),
    ],
    ids=["text", "gif", "bomb-over-our-cap", "bomb-over-pillows-cap", "mask-size", "truncated"],
)
def test_bad_uploads_are_400_in_openai_shape(live_service: LiveServer, files, param, words):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live_service.url).images.edit(prompt="a fox", size="64x64", **files)
    error = caught.value
    assert error.status_code == 400 and error.param == param and words in error.message
    assert error.type == "invalid_request_error"


def test_an_oversized_upload_is_refused_before_decoding(live_service: LiveServer):
    limit = live_service.settings.max_upload_bytes
    big = picture() + b"\0" * limit  # a valid PNG with junk after it: only its size is wrong
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live_service.url).images.edit(image=("big.png", big, "image/png"), prompt="a fox", size="64x64")
    assert caught.value.param == "image" and f"the limit is {limit}" in caught.value.message


def test_a_body_past_the_edit_bound_is_413_in_openai_shape(live_service: LiveServer):
    bound = live_service.settings.edit_body_limits.max_bytes
    answer = httpx.post(
        f"{live_service.url}{PATH}",
        files={"image": ("big.png", b"\0" * (bound + 1), "image/png")},
        data={"prompt": "a fox"},
        timeout=120,
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("fields", "with_image", "param", "words"),
    [
        ({"prompt": "a fox"}, False, "image", "image is required"),
        ({"prompt": "a fox", "image": "text"}, False, "image", "must be a file"),
        ({"prompt": "a fox", "strength": "1.5"}, True, "strength", "strength"),
        ({"prompt": "a fox", "strength": "0.2", "steps": "2"}, True, "strength", "steps x strength is 0.4"),
        ({"prompt": "a fox", "input_fidelity": "high"}, True, "input_fidelity", "strength"),
        ({"prompt": "a fox", "stream": "true"}, True, "stream", "streaming is not offered"),
        ({"prompt": "a fox", "colour": "red"}, True, "colour", "colour"),
    ],
    ids=["no-image", "image-as-text", "strength-range", "too-few-steps", "input-fidelity", "stream", "unknown"],
)
def test_bad_fields_are_400_naming_the_field(live_service: LiveServer, fields, with_image, param, words):
    parts = {name: (None, value) for name, value in fields.items()}  # text parts of a multipart body
    if with_image:
        parts["image"] = ("a.png", picture((64, 64)), "image/png")
    answer = httpx.post(f"{live_service.url}{PATH}", files=parts, timeout=120)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert words in error["message"] and error["param"] == param


def test_a_json_body_is_told_to_use_multipart(live_service: LiveServer):
    answer = httpx.post(f"{live_service.url}{PATH}", json={"prompt": "a fox"}, timeout=30)
    assert answer.status_code == 400 and "multipart/form-data" in answer.json()["error"]["message"]


def test_without_a_size_the_image_size_is_kept_or_named(live_service: LiveServer):
    answer = sdk(live_service.url).images.edit(
        image=("photo.png", picture((72, 104)), "image/png"), prompt="a fox", extra_body={"steps": 2}
    )
    assert png_of(answer.data[0].b64_json).size == (72, 104)
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live_service.url).images.edit(image=("photo.png", picture((100, 100)), "image/png"), prompt="a fox")
    assert caught.value.param == "size" and "the image is 100x100" in caught.value.message


def test_generate_takes_an_init_image_and_mask_as_base64(live_service: LiveServer):
    body = {
        "prompt": "a fox",
        "init_image": base64.b64encode(picture()).decode(),
        "mask_image": "data:image/png;base64," + base64.b64encode(hole_mask()).decode(),
        "width": 64,
        "height": 64,
        "steps": 2,
        "seed": 4,
    }
    answer = httpx.post(f"{live_service.url}/v1/generate", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    assert Image.open(io.BytesIO(answer.content)).size == (64, 64)
    no_mask = {**body, "mask_image": None, "strength": 0.9}
    again = httpx.post(f"{live_service.url}/v1/generate", json=no_mask, timeout=120)
    assert again.status_code == 200 and again.content != answer.content


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"init_image": "%%%"}, "init_image is not base64"),
        ({"init_image": base64.b64encode(bomb_png(5000, 5000)).decode()}, "5000x5000 pixels"),
        ({"init_image": None, "strength": 0.5}, "send init_image with them"),
    ],
    ids=["not-base64", "bomb", "strength-without-image"],
)
def test_generate_refuses_bad_init_images_with_a_422(live_service: LiveServer, change, words):
    body = {"prompt": "a fox", "init_image": base64.b64encode(picture()).decode(), "steps": 2, **change}
    answer = httpx.post(f"{live_service.url}/v1/generate", json=body, timeout=120)
    assert answer.status_code == 422 and words in answer.json()["error"], answer.text
