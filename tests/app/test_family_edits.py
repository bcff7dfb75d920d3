"""Edits on the SDXL- and FLUX.1-schnell-shaped diffusers folders (the tiny built-ins saved as folders), through the
official `openai` client against the real server: image to image and inpainting return a PNG of the asked size."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.app.live_server import serve
from tests.app.test_image_edits import hole_mask, picture, png_of, sdk
from tests.support.family_folders import FAMILY_SETTINGS, saved_folder


@pytest.fixture(scope="module", params=["builtin:tiny-sdxl", "builtin:tiny-flux"])
def family_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("family-edits")
    with serve(root, model_id=str(saved_folder(request.param, root)), **FAMILY_SETTINGS) as live:
        yield live.url


@pytest.mark.parametrize("masked", [False, True], ids=["image-to-image", "inpainting"])
def test_the_family_edits_to_the_asked_size(family_url: str, masked: bool):
    mask = {"mask": ("mask.png", hole_mask((128, 128)), "image/png")} if masked else {}
    answer = sdk(family_url).images.edit(
        image=("photo.png", picture((128, 128)), "image/png"),
        prompt="a red door",
        size="128x128",
        extra_body={"steps": 4, "seed": 2, "strength": 1.0},
        **mask,
    )
    assert png_of(answer.data[0].b64_json).size == (128, 128)


def test_too_few_steps_for_the_strength_is_a_400(family_url: str):
    # diffusers runs int(steps x strength) steps: 1 x 0.5 would run none.
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(family_url).images.edit(
            image=("photo.png", picture((128, 128)), "image/png"),
            prompt="a door",
            size="128x128",
            extra_body={"steps": 1, "strength": 0.5},
        )
    assert "steps x strength is 0.5" in caught.value.message


@pytest.fixture(scope="module", params=["builtin:tiny-z-image", "builtin:tiny-qwen-image", "builtin:tiny-flux2-klein"])
def family_2026(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    with serve(tmp_path_factory.mktemp("edits-2026"), model_id=request.param, **FAMILY_SETTINGS) as live:
        yield request.param, live.url


def test_the_2026_families_edit_where_diffusers_has_the_pipeline(family_2026: tuple[str, str]):
    model, url = family_2026

    def edit(**mask: object) -> openai.types.ImagesResponse:
        return sdk(url).images.edit(
            image=("photo.png", picture((128, 128)), "image/png"),
            prompt="a red door",
            size="128x128",
            extra_body={"steps": 4, "seed": 2, "strength": 1.0},
            **mask,  # type: ignore[arg-type]
        )

    if model == "builtin:tiny-flux2-klein":
        # diffusers 0.42's image-to-image entry for FLUX.2 [klein] is its text-to-image pipeline (the image a
        # reference, no strength): no edit is served, and it says so rather than failing.
        with pytest.raises(openai.BadRequestError) as caught:
            edit()
        assert "diffusers has no image-to-image pipeline for FLUX.2 [klein]" in caught.value.message
        assert "size" not in caught.value.message
        return
    assert png_of(edit().data[0].b64_json).size == (128, 128)
    masked = edit(mask=("mask.png", hole_mask((128, 128)), "image/png"))
    assert png_of(masked.data[0].b64_json).size == (128, 128)
