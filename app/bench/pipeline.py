"""`python -m app.bench pipeline`: seconds per image, baseline and optimized, in one run.

For each variant (the plain diffusers pipeline, then the service's speed settings, or with
`--ladder` one more setting at a time) and each batch size, it loads the model fresh, warms up
(compiling where set), times repeated calls end to end (median), then runs `--stage-passes` more
calls with per-stage hooks for the breakdown (medians). It prints one table with the ratio to the
baseline and the share of the FLOP floor, and with `--results-file` writes it, with its
provenance, into a marked section of that markdown file.

The optimized variant's settings are the service's own (environment variables such as
CUDA_COMPILE=default), so what is measured is what is served.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.backends.cuda_tuning import (
    ServedShape,
    apply_speed_settings,
    describe,
    load_dtype,
    plan_speed_settings,
    run_shape,
    warm_up,
)
from app.backends.step_cache import denoiser_class_of
from app.bench.flops import DEFAULT_PEAK_TFLOPS, ImageFlops, pipeline_image_flops
from app.bench.report import format_table
from app.bench.stages import stage_timer
from app.models.builtin import BUILTIN_PREFIX, builtin_spec
from app.models.random_pipeline import materialize
from app.models.sd21_base import BENCH_MODEL_NAME, SD21_BASE
from app.settings import Settings, load_settings
from common.bench.results_file import update_section

PROMPT = "a photograph of an astronaut riding a horse"
# The plain diffusers pipeline the ratios are against: fp16 on a GPU (fp32 on a CPU, where
# the dtype step is skipped), SDPA attention, eager.
BASELINE_OVERRIDES: dict[str, object] = {
    "cuda_dtype": "fp16",
    "cuda_sdpa": True,
    "cuda_fuse_qkv": False,
    "cuda_channels_last": False,
    "cuda_compile": "off",
    "cuda_graphs": False,
    "cuda_step_cache": False,
}
# The order in which --ladder turns on the optimized settings, one group per rung.
LADDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("dtype", ("cuda_dtype",)),
    ("attention", ("cuda_sdpa",)),
    ("fuse_qkv", ("cuda_fuse_qkv",)),
    ("channels_last", ("cuda_channels_last",)),
    ("compile", ("cuda_compile", "cuda_inductor_tuning")),
    ("cuda_graphs", ("cuda_graphs",)),
    ("step_cache", ("cuda_step_cache", "cuda_step_cache_threshold")),
)
# Every speed setting, in ladder order.
SPEED_FIELDS = tuple(field for _, fields in LADDER for field in fields)


@dataclass(frozen=True)
class Variant:
    """One column of the comparison: a name and the settings its pipeline is prepared with."""

    name: str
    settings: Settings


@dataclass(frozen=True)
class Measurement:
    """One variant at one batch size: end-to-end median and one stage-timed pass."""

    variant: str
    batch: int
    seconds_per_batch: float  # median over the timed iterations
    text_encoder_s: float
    unet_step_s: float
    vae_decode_s: float
    other_s: float  # scheduler, latents, image conversion: the stage pass minus its stages

    @property
    def seconds_per_image(self) -> float:
        """End-to-end seconds per image at this batch size."""
        return self.seconds_per_batch / self.batch

    @property
    def images_per_second(self) -> float:
        """Images per second at this batch size."""
        return self.batch / self.seconds_per_batch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `pipeline` mode's options to `parser`."""
    parser.add_argument(
        "--model",
        default=BENCH_MODEL_NAME,
        help=f"{BENCH_MODEL_NAME} (SD 2.1-base architecture, random weights), builtin:tiny, or a diffusers folder",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="where built models go (MODEL_CACHE_DIR)")
    parser.add_argument("--batch-sizes", default="1,8", help="comma-separated, e.g. 1,8")
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--guidance-scale", type=float, default=7.5)
    parser.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed calls per variant and batch size (at least 1, which compiles)",
    )
    parser.add_argument("--iterations", type=int, default=5, help="timed calls; the median is reported")
    parser.add_argument("--stage-passes", type=int, default=3, help="stage-timed calls; medians are reported")
    parser.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS, help="the device's peak")
    parser.add_argument("--ladder", action="store_true", help="add one optimized setting at a time")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--results-file", type=Path, default=None, help="markdown file to write the figures into")


def resolve_model(model: str, cache_dir: Path) -> Path:
    """The diffusers folder for `model`: the benchmark model, a built-in one, or a local folder."""
    if model == BENCH_MODEL_NAME:
        return materialize(SD21_BASE, cache_dir)
    if model.startswith(BUILTIN_PREFIX):
        return materialize(builtin_spec(model), cache_dir)
    path = Path(model).expanduser()
    if not (path / "model_index.json").is_file():
        raise ValueError(f"{model!r} is neither {BENCH_MODEL_NAME}, a builtin: model, nor a diffusers folder")
    return path


def variants(optimized: Settings, ladder: bool, device_type: str, denoiser_class: str | None = None) -> list[Variant]:
    """Baseline first, then the optimized settings (or each rung of the ladder towards them).

    A rung that applies nothing new on this device and model (a setting already at its value, or a
    step skipped here, such as bf16 on a CPU or the step cache on a UNet) is left out rather than
    measured twice, and so is one that would turn off a step applied before (CUDA graphs on a CPU
    skip the compile).
    """
    baseline = optimized.model_copy(update=BASELINE_OVERRIDES)
    result = [Variant("baseline", baseline)]
    if not ladder:
        return [*result, Variant("optimized", optimized)]
    current = baseline
    for rung, fields in LADDER:
        candidate = current.model_copy(update={f: getattr(optimized, f) for f in fields})
        before = plan_speed_settings(current, device_type, denoiser_class)
        after = plan_speed_settings(candidate, device_type, denoiser_class)
        lost = any(b.skipped is None and a.skipped is not None for b, a in zip(before, after, strict=True))
        if describe(after) == describe(before) or lost:
            continue
        current = candidate
        result.append(Variant(f"+{rung}", current))
    return result


def _device(choice: str) -> Any:
    import torch

    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def _load(path: Path, settings: Settings, device: Any) -> Any:
    from diffusers import StableDiffusionPipeline

    # No safety checker in any variant: it is not part of the generation cost being compared.
    pipe = StableDiffusionPipeline.from_pretrained(
        path, dtype=load_dtype(settings, device.type), safety_checker=None, requires_safety_checker=False
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def _call(pipe: Any, shape: ServedShape, steps: int, guidance_scale: float) -> None:
    run_shape(pipe, shape, steps=steps, guidance_scale=guidance_scale, prompt=PROMPT)


def _timed_call(pipe: Any, shape: ServedShape, steps: int, guidance_scale: float) -> float:
    import torch

    if pipe.device.type == "cuda":
        torch.cuda.synchronize(pipe.device)
    started = time.perf_counter()
    _call(pipe, shape, steps, guidance_scale)
    if pipe.device.type == "cuda":
        torch.cuda.synchronize(pipe.device)
    return time.perf_counter() - started


def measure(pipe: Any, variant: str, shape: ServedShape, args: argparse.Namespace) -> Measurement:
    """Warm up, time `args.iterations` calls, then `args.stage_passes` stage-timed calls."""
    warm_up(pipe, [shape], steps=args.steps, guidance_scale=args.guidance_scale)
    for _ in range(args.warmup - 1):
        _call(pipe, shape, args.steps, args.guidance_scale)
    seconds = [_timed_call(pipe, shape, args.steps, args.guidance_scale) for _ in range(args.iterations)]
    passes = []
    for _ in range(args.stage_passes):
        with stage_timer(pipe) as stages:
            total = _timed_call(pipe, shape, args.steps, args.guidance_scale)
        passes.append((stages, total))

    def median_of(stage: str) -> float:
        return statistics.median(times.seconds[stage] / max(times.calls[stage], 1) for times, _ in passes)

    return Measurement(
        variant=variant,
        batch=shape.batch,
        seconds_per_batch=statistics.median(seconds),
        text_encoder_s=statistics.median(times.seconds["text_encoder"] for times, _ in passes),
        unet_step_s=median_of("unet"),
        vae_decode_s=statistics.median(times.seconds["vae_decode"] for times, _ in passes),
        other_s=statistics.median(max(total - sum(times.seconds.values()), 0.0) for times, total in passes),
    )


def _release(device: Any) -> None:
    import torch
    import torch._dynamo

    gc.collect()
    torch._dynamo.reset()  # each variant compiles from scratch, as a fresh service would
    if device.type == "cuda":
        torch.cuda.empty_cache()


def device_name(device: Any) -> str:
    """The GPU's name, or the CPU's model and the threads torch uses."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass  # not Linux: platform's answer stands
    return f"CPU {cpu}, {torch.get_num_threads()} threads"


def software_versions() -> str:
    """Python, torch (and its CUDA), diffusers and transformers versions."""
    import diffusers
    import torch
    import transformers

    cuda = f" (CUDA {torch.version.cuda})" if torch.version.cuda else ""
    return (
        f"Python {platform.python_version()}, torch {torch.__version__}{cuda}, "
        f"diffusers {diffusers.__version__}, transformers {transformers.__version__}"
    )


def git_commit() -> str:
    """The checked-out commit, flagged when the measured code (under app/) has local changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "app"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    commit = head.stdout.strip() or "unknown"
    return commit + (" with uncommitted changes under app/" if changed.stdout.strip() else "")


def command_line(args: argparse.Namespace, settings: Settings) -> str:
    """The command that reproduces this run: changed speed settings as environment, then options."""
    defaults = Settings.model_fields
    env = [
        f"{name.upper()}={getattr(settings, name)}"
        for name in SPEED_FIELDS
        if getattr(settings, name) != defaults[name].default
    ]
    options = [
        f"--model {shlex.quote(args.model)}",
        f"--batch-sizes {args.batch_sizes}",
        f"--height {args.height} --width {args.width} --steps {args.steps}",
        f"--warmup {args.warmup} --iterations {args.iterations} --stage-passes {args.stage_passes}",
    ]
    if args.guidance_scale != 7.5:
        options.append(f"--guidance-scale {args.guidance_scale}")
    if args.peak_tflops != DEFAULT_PEAK_TFLOPS:
        options.append(f"--peak-tflops {args.peak_tflops}")
    if args.ladder:
        options.append("--ladder")
    return " ".join([*env, "python -m app.bench pipeline", *options])


def table(measurements: list[Measurement], flops: ImageFlops, peak_tflops: float) -> str:
    """The comparison table: per variant and batch size, against the same batch size's baseline."""
    baseline = {m.batch: m.seconds_per_image for m in measurements if m.variant == "baseline"}
    floor = flops.floor_seconds(peak_tflops)
    headers = [
        "variant",
        "batch",
        "s/image",
        "images/s",
        "x baseline",
        "% of floor",
        "text enc ms",
        "UNet ms/step",
        "VAE ms",
        "other ms",
    ]
    rows = [
        [
            m.variant,
            m.batch,
            m.seconds_per_image,
            m.images_per_second,
            baseline[m.batch] / m.seconds_per_image,
            100.0 * floor / m.seconds_per_image,
            1000 * m.text_encoder_s,
            1000 * m.unet_step_s,
            1000 * m.vae_decode_s,
            1000 * m.other_s,
        ]
        for m in measurements
    ]
    return format_table(headers, rows)


def run(args: argparse.Namespace) -> int:
    """Run the comparison, print it, and write it to `args.results_file` when given."""
    settings = load_settings()
    commit = git_commit()  # now, before the code or the checkout can change during a long run
    device = _device(args.device)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    model_path = resolve_model(args.model, args.cache_dir or settings.model_cache_dir)
    net_class = denoiser_class_of(json.loads((model_path / "model_index.json").read_text(encoding="utf-8")))

    measurements: list[Measurement] = []
    flops: ImageFlops | None = None
    lines = []
    for variant in variants(settings, args.ladder, device.type, net_class):
        applied = describe(plan_speed_settings(variant.settings, device.type, net_class))
        lines.append(f"  - `{variant.name}`: {applied}")
        pipe = apply_speed_settings(_load(model_path, variant.settings, device), variant.settings)
        if flops is None:
            flops = pipeline_image_flops(pipe, height=args.height, width=args.width, steps=args.steps)
        for batch in batch_sizes:
            shape = ServedShape(batch, args.height, args.width)
            measurements.append(measure(pipe, variant.name, shape, args))
            print(f"measured {variant.name} at batch {batch}", flush=True)
        del pipe
        _release(device)
    assert flops is not None  # at least the baseline ran

    body = "\n".join(
        [
            f"### `{args.model}` on {device_name(device)}: {args.height}x{args.width}, {args.steps} steps, "
            f"guidance {args.guidance_scale}",
            "",
            f"- Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC at commit {commit}; "
            f"{software_versions()}.",
            f"- FLOPs per image: {flops.total / 1e12:.3g} TFLOP (text encoder {flops.text_encoder / 1e12:.3g}, "
            f"UNet {flops.unet_step / 1e12:.3g} per step, VAE decode {flops.vae_decode / 1e12:.3g}); floor at "
            f"{args.peak_tflops:g} TFLOP/s: {flops.floor_seconds(args.peak_tflops):.3g} s per image.",
            f"- Median of {args.iterations} timed calls after {args.warmup} warm-up calls; stages: medians of "
            f"{args.stage_passes} further calls with synchronizing hooks.",
            "- Variants (applied steps):",
            *lines,
            f"- Command: `{command_line(args, settings)}`",
            "",
            table(measurements, flops, args.peak_tflops),
        ]
    )
    print(body)
    if args.results_file is not None:
        key = f"pipeline {device_name(device)} {args.model} {args.height}x{args.width} {args.steps} {args.batch_sizes}"
        key += " ladder" if args.ladder else ""
        update_section(args.results_file, key, body)
        print(f"written to {args.results_file}")
    return 0
