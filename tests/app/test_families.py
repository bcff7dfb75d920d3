"""Image model families: detection from model_index.json, sizes, bounds, and the tiny built-in model per family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.models.builtin import BUILTIN_MODELS, builtin_spec
from app.models.families import (
    FAMILIES,
    FLUX_SCHNELL,
    SD,
    SDXL,
    UnknownFamily,
    family_named,
    family_of,
    family_of_class,
)
from app.models.random_pipeline import materialize


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each built-in model materialized once: name -> diffusers folder."""
    cache = tmp_path_factory.mktemp("builtin-models")
    return {name: materialize(spec, cache) for name, spec in BUILTIN_MODELS.items()}


@pytest.mark.parametrize(("name", "family"), [("tiny", SD), ("tiny-sdxl", SDXL), ("tiny-flux", FLUX_SCHNELL)])
def test_each_builtin_folder_is_detected_as_its_family(built: dict[str, Path], name: str, family: object) -> None:
    assert family_of(built[name]) is family
    assert builtin_spec(f"builtin:{name}").family == family_of(built[name]).name


def test_an_unknown_pipeline_class_names_the_served_ones(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": "StableCascadeCombinedPipeline"}))
    with pytest.raises(UnknownFamily, match=r"StableCascadeCombinedPipeline.*StableDiffusionXLPipeline.*FluxPipeline"):
        family_of(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "does not exist"), ("[1, 2]", "not a JSON object"), ("{", "not a JSON object"), ("{}", "_class_name")],
)
def test_a_folder_without_a_readable_pipeline_class_is_a_clear_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / "model_index.json").write_text(content)
    with pytest.raises(UnknownFamily, match=message):
        family_of(tmp_path)


def test_families_are_found_by_name_and_class() -> None:
    assert [family_named(f.name) for f in FAMILIES] == list(FAMILIES)
    assert family_of_class("FluxPipeline") is FLUX_SCHNELL
    with pytest.raises(UnknownFamily, match="sd, sdxl, flux"):
        family_named("pixart")


def test_guidance_distilled_flux_takes_no_guidance_or_negative_prompt() -> None:
    assert FLUX_SCHNELL.guidance is False and FLUX_SCHNELL.negative_prompt is False
    assert FLUX_SCHNELL.default_steps == 4 and FLUX_SCHNELL.max_sequence_length == 256
    assert SDXL.guidance and SDXL.default_guidance == 5.0 and SD.guidance


def test_native_sizes_start_with_the_square_default_and_fit_the_bounds() -> None:
    for family in FAMILIES:
        assert family.default_size == (family.reference_side, family.reference_side)
        for width, height in family.native_sizes:
            assert family.size_problems(width, height) == [], (family.name, width, height)
    assert (896, 1152) in SDXL.native_sizes and (1152, 896) in SDXL.native_sizes


def test_sizes_scale_to_a_small_model_on_the_family_grid() -> None:
    assert SDXL.sizes_at(1024) == SDXL.native_sizes
    small = SDXL.sizes_at(256)
    assert small[0] == (256, 256) and (224, 288) in small and (288, 224) in small
    assert all(w % 8 == 0 and h % 8 == 0 for w, h in small)
    assert all(w % 16 == 0 and h % 16 == 0 for w, h in FLUX_SCHNELL.sizes_at(256))


def test_size_problems_name_the_family_grid() -> None:
    assert FLUX_SCHNELL.size_problems(1000, 1024) == [
        "width must be a multiple of 16 between 256 and 2048 for this FLUX.1-schnell model; got 1000"
    ]
    assert len(SDXL.size_problems(4096, 60)) == 2
    assert SD.size_problems(512, 768) == []


def test_bounds_scale_with_a_small_model_and_narrow_to_the_operator_limits() -> None:
    assert FLUX_SCHNELL.bounds_at(1024) == FLUX_SCHNELL.bounds
    small = FLUX_SCHNELL.bounds_at(256)
    assert (small.min_side, small.max_side, small.multiple_of) == (64, 512, 16)
    assert all(small.problems(w, h, "x") == [] for w, h in FLUX_SCHNELL.sizes_at(256))
    narrowed = small.within(72, 200)
    assert (narrowed.min_side, narrowed.max_side) == (80, 192)


def test_the_tiny_sdxl_has_the_real_component_structure(built: dict[str, Path]) -> None:
    from diffusers import StableDiffusionXLPipeline

    pipe = StableDiffusionXLPipeline.from_pretrained(built["tiny-sdxl"])
    assert pipe.unet.config.addition_embed_type == "text_time"
    assert type(pipe.text_encoder).__name__ == "CLIPTextModel"
    assert type(pipe.text_encoder_2).__name__ == "CLIPTextModelWithProjection"
    assert pipe.unet.config.cross_attention_dim == (
        pipe.text_encoder.config.hidden_size + pipe.text_encoder_2.config.hidden_size
    )
    assert pipe.tokenizer_2("a red cat").input_ids != pipe.tokenizer_2("a blue dog").input_ids


def test_the_tiny_flux_has_the_real_component_structure(built: dict[str, Path]) -> None:
    from diffusers import FluxPipeline

    index = json.loads((built["tiny-flux"] / "model_index.json").read_text())
    assert index["tokenizer_2"] == ["transformers", "T5TokenizerFast"]  # loadable by transformers 4.x too
    pipe = FluxPipeline.from_pretrained(built["tiny-flux"])
    assert type(pipe.transformer).__name__ == "FluxTransformer2DModel"
    assert type(pipe.text_encoder_2).__name__ == "T5EncoderModel"
    assert type(pipe.scheduler).__name__ == "FlowMatchEulerDiscreteScheduler"
    assert pipe.vae.config.latent_channels == 16
    assert pipe.transformer.config.guidance_embeds is False
    assert pipe.tokenizer_2.model_max_length == FLUX_SCHNELL.max_sequence_length
    ids = [pipe.tokenizer_2(text).input_ids for text in ("a red cat", "a blue dog")]
    assert ids[0] != ids[1] and pipe.tokenizer_2.unk_token_id not in ids[0]


@pytest.mark.parametrize("name", ["tiny-sdxl", "tiny-flux"])
def test_each_tiny_model_draws_an_image_of_the_asked_size(built: dict[str, Path], name: str) -> None:
    import torch
    from diffusers import DiffusionPipeline

    pipe = DiffusionPipeline.from_pretrained(built[name])
    pipe.set_progress_bar_config(disable=True)
    image = pipe(
        prompt="a red cat", num_inference_steps=2, width=128, height=192, generator=torch.Generator().manual_seed(0)
    ).images[0]
    assert image.size == (128, 192)


@pytest.mark.parametrize("name", ["tiny-sdxl", "tiny-flux"])
def test_cuda_speed_steps_keep_each_family_drawing_the_same_image(
    built: dict[str, Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CUDA backend's steps (here on the CPU, compile faked) on a UNet family and on Flux's transformer."""
    import numpy as np
    import torch

    from app.backends.base import family_arguments
    from app.backends.cuda_tuning import ServedShape, apply_speed_settings, warm_up
    from app.backends.diffusers_backend import denoiser, load_diffusers_pipeline
    from app.settings import load_settings

    pipe, family = load_diffusers_pipeline(built[name])

    def draw() -> np.ndarray:
        generator = torch.Generator().manual_seed(0)
        call = {"prompt": "a red cat", "num_inference_steps": 2, "width": 64, "height": 64, "generator": generator}
        return np.asarray(pipe(**call, **family_arguments(family, None)).images[0], dtype=np.float32)

    reference = draw()
    compiled: list[object] = []
    monkeypatch.setattr(torch, "compile", lambda target, **_: compiled.append(target) or target)
    net = denoiser(pipe)
    apply_speed_settings(pipe, load_settings(cuda_compile="default"))
    assert compiled[0] is net and denoiser(pipe) is net
    np.testing.assert_allclose(draw(), reference, atol=2.0)  # 8-bit pixels; fused projections round differently
    timings = warm_up(pipe, [ServedShape(1, 64, 64)], steps=2, arguments=family_arguments(family, None))
    assert len(timings) == 1
