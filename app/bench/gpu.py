"""`python -m app.bench gpu`: the headline figures on one H100/H200, eager bf16, headline first (`make bench-gpu`).

In this order, within `--budget-s`: SD 2.1-base 512x512 50 steps at batch 1 and 8, SDXL 1024x1024 30 steps at
batch 1, FLUX.1-schnell and FLUX.2 [klein] 4B 1024x1024 4 steps at batch 1, each on a full-size pipeline with
random weights built from the published configs (app/bench/gpu_models.py: no download), eager bf16 with SDPA
attention (diffusers' default). Then, while the budget lasts, the speed ladder at batch 1
(app/backends/cuda_tuning.py's settings, one more per rung: plain attention below the eager row, fused QKV,
channels-last, the step cache where the family has one, one compile mode), every family's eager rungs before any
compile. One pipeline is on the device at a time, freed before the next is built.

The section it writes (into `--results-file`, rewritten after every pipeline, so a run stopped half-way still
leaves what it measured) holds each figure with the device, driver, torch and diffusers versions, and the cost
per 1,000 images on the instance each preset is pinned to (app/bench/gpu_costs.py: an estimate, scaled from the
measured GPU). `--dry-run` runs the same code on the CPU with tiny configs and two steps (the tests do).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.backends.base import family_arguments
from app.backends.cuda_tuning import (
    ServedShape,
    apply_speed_settings,
    describe,
    plan_speed_settings,
    run_shape,
    warm_up,
)
from app.backends.step_cache import denoiser_class_of, unsupported_reason
from app.bench.gpu_costs import PinnedInstance, estimate, gpu_of_device, read_prices
from app.bench.gpu_models import MODELS, build_pipeline, model_index
from app.bench.pipeline import PROMPT, device_name, git_commit, software_versions
from app.bench.report import format_table
from app.models.families import family_of_class
from app.settings import Settings, load_settings
from common.bench.results_file import update_section

DEFAULT_BUDGET_S = 480  # 8 minutes on the GPU machine, the wheels' install and the imports aside
DEFAULT_PRICES = Path(".bench-gpu/prices.json")  # written by `make bench-gpu-wheels`
# Not measured yet when the ladder is planned: a compile's own time, added to a compiled rung's estimate so that
# one is not started with too little left (the 2026-11-27 H100 run saw single shapes take minutes with tuning on).
COMPILE_ALLOWANCE_S = 150.0

# Eager bf16, SDPA attention, nothing else: the headline variant, and the ladder's reference rung.
EAGER: dict[str, object] = {
    "cuda_dtype": "bf16",
    "cuda_sdpa": True,
    "cuda_fuse_qkv": False,
    "cuda_channels_last": False,
    "cuda_compile": "off",
    "cuda_graphs": False,
    "cuda_inductor_tuning": False,
    "cuda_step_cache": False,
}


@dataclass(frozen=True)
class Shape:
    """What one model is measured at."""

    width: int
    height: int
    steps: int
    batches: tuple[int, ...]


FULL_SHAPES: dict[str, Shape] = {
    "sd21-base": Shape(512, 512, 50, (1, 8)),
    "sdxl-base": Shape(1024, 1024, 30, (1,)),
    "flux-schnell": Shape(1024, 1024, 4, (1,)),
    # Its share of the budget, from its size: the 3.9 B transformer over 4,096 image and 512 prompt tokens counts
    # 34.8 TFLOP a step on the meta device (torch's FlopCounterMode), Qwen3-4B's 512-token prompt 3.9: about 150
    # TFLOP a call with the VAE decode, 0.15 s at an H100's dense bf16 peak and under a second at a
    # quarter of it; 4 calls and the build (8 B parameters drawn on the device, like FLUX.1-schnell's 16.6 B
    # before it) add well under a minute to the headline.
    "flux2-klein-4b": Shape(1024, 1024, 4, (1,)),
}
# The dry run: the same batches at a size every family accepts (Flux: a multiple of 16), two steps.
DRY_SHAPES: dict[str, Shape] = {name: Shape(64, 64, 2, shape.batches) for name, shape in FULL_SHAPES.items()}


@dataclass(frozen=True)
class Rung:
    """One variant: its name and the speed settings it changes from EAGER."""

    name: str
    update: dict[str, object] = field(default_factory=dict)

    @property
    def compiles(self) -> bool:
        """Whether this variant compiles (its estimate gets COMPILE_ALLOWANCE_S)."""
        return self.update.get("cuda_compile", "off") != "off"


EAGER_RUNG = Rung("eager (SDPA)")


def ladder_rungs(compile_mode: str) -> tuple[Rung, ...]:
    """The ladder below and above the eager row: each rung one more setting than the one before it."""
    fused = {"cuda_fuse_qkv": True}
    laid_out = {**fused, "cuda_channels_last": True}
    return (
        Rung("plain attention", {"cuda_sdpa": False}),
        Rung("+fuse_qkv", fused),
        Rung("+channels_last", laid_out),
        # Eager: a whole-graph compile cannot take the cache, so the compile rung goes on without it.
        Rung("+step_cache", {**laid_out, "cuda_step_cache": True}),
        Rung(f"+compile {compile_mode}", {**laid_out, "cuda_compile": compile_mode}),
    )


@dataclass(frozen=True)
class Group:
    """One pipeline build and the batches measured on it."""

    model: str
    rung: Rung
    batches: tuple[int, ...]
    headline: bool


def plan(ladder: bool, compile_mode: str) -> list[Group]:
    """The headline groups, then the ladder: every model's eager rungs first, the compiled rungs last."""
    groups = [Group(name, EAGER_RUNG, FULL_SHAPES[name].batches, True) for name in MODELS]
    if not ladder:
        return groups
    rungs = ladder_rungs(compile_mode)
    for compiled in (False, True):
        for name in MODELS:
            # A transformer family keeps its own attention processors: plain attention would only touch its VAE.
            transformer = "transformer" in model_index(MODELS[name])
            # The step cache where the family's denoiser has one (not the UNets).
            cached = unsupported_reason(denoiser_class_of(model_index(MODELS[name]))) is None
            groups += [
                Group(name, rung, (1,), False)
                for rung in rungs
                if rung.compiles == compiled
                and not (transformer and rung.update.get("cuda_sdpa") is False)
                and (cached or not rung.update.get("cuda_step_cache"))
            ]
    return groups


@dataclass
class Row:
    """One model at one batch size in one variant: its timings, or why it has none."""

    model: str
    rung: str
    batch: int
    headline: bool
    status: str = "not reached: the run stopped before this row"
    seconds: list[float] = field(default_factory=list)  # per timed call
    build_s: float = 0.0
    peak_gib: float | None = None
    applied: str = ""

    @property
    def measured(self) -> bool:
        """Whether the row has timings."""
        return bool(self.seconds)

    @property
    def seconds_per_call(self) -> float:
        """Median seconds per pipeline call."""
        return statistics.median(self.seconds)

    @property
    def seconds_per_image(self) -> float:
        """Median seconds per call over the batch."""
        return self.seconds_per_call / self.batch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `gpu` mode's options to `parser`."""
    parser.add_argument("--dry-run", action="store_true", help="tiny configs, two steps, on the CPU: checks the path")
    parser.add_argument("--results-file", type=Path, default=None, help="markdown file to write the section into")
    parser.add_argument("--json", type=Path, default=None, help="also write every row as JSON here")
    parser.add_argument(
        "--prices", type=Path, default=DEFAULT_PRICES, help="pinned instances and prices (make bench-gpu-wheels)"
    )
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="no ladder rung starts past this")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls per row (at least 1)")
    parser.add_argument("--iterations", type=int, default=3, help="timed calls per row; the median is reported")
    parser.add_argument("--no-ladder", action="store_true", help="the headline rows only")
    parser.add_argument("--compile-mode", default="default", help="the ladder's compile rung (CUDA_COMPILE's values)")
    parser.add_argument(
        "--scale-from",
        choices=("H100 SXM", "H200"),
        default=None,
        help="the GPU to scale cost estimates from when the device's name is not recognised",
    )


def driver_version() -> str:
    """The NVIDIA driver's version from nvidia-smi, or why there is none."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "none (no nvidia-smi)"
    return result.stdout.strip().splitlines()[0] if result.returncode == 0 and result.stdout.strip() else "unknown"


def _release(device: Any) -> None:
    import torch
    import torch._dynamo

    gc.collect()
    torch._dynamo.reset()  # a compiled rung's graphs go with its pipeline
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _timed_call(pipe: Any, shape: ServedShape, steps: int, arguments: dict[str, Any]) -> float:
    import torch

    if pipe.device.type == "cuda":
        torch.cuda.synchronize(pipe.device)
    started = time.perf_counter()
    run_shape(pipe, shape, steps=steps, guidance_scale=0.0, prompt=PROMPT, arguments=arguments)
    if pipe.device.type == "cuda":
        torch.cuda.synchronize(pipe.device)
    return time.perf_counter() - started


def measure_group(
    group: Group, rows: list[Row], shape: Shape, settings: Settings, args: argparse.Namespace, device: Any
) -> None:
    """Build the group's pipeline, prepare it as its rung says, and time each batch into its row."""
    import torch

    model = MODELS[group.model]
    family = family_of_class(str(model_index(model)["_class_name"]))
    # The service's own call arguments (guidance where the family takes it, schnell's T5 length); a tensor out,
    # so the VAE decode is timed but random weights' NaNs never reach an image conversion.
    arguments = {**family_arguments(family, None), "output_type": "pt"}
    variant = settings.model_copy(update={**EAGER, **group.rung.update})
    applied = describe(plan_speed_settings(variant, device.type, denoiser_class_of(model_index(model))))
    dtype = torch.bfloat16
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tokenizer_dir:
        pipe = build_pipeline(
            model,
            device=device,
            dtype=dtype,
            tokenizer_dir=Path(tokenizer_dir),
            max_sequence_length=family.max_sequence_length,
            dry=args.dry_run,
        )
    try:
        pipe = apply_speed_settings(pipe, variant)
        build_s = time.perf_counter() - started
        for row in rows:
            served = ServedShape(row.batch, shape.height, shape.width)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            for _ in range(max(args.warmup, 1)):
                warm_up(pipe, [served], steps=shape.steps, prompt=PROMPT, arguments=arguments)
            row.seconds = [_timed_call(pipe, served, shape.steps, arguments) for _ in range(args.iterations)]
            row.build_s, row.applied, row.status = build_s, applied, "measured"
            if device.type == "cuda":
                row.peak_gib = torch.cuda.max_memory_allocated(device) / 2**30
    finally:
        del pipe
        _release(device)


def expected_seconds(group: Group, rows: Sequence[Row], warmup: int, iterations: int) -> float:
    """What the group should take, from the same model's rows measured before (0 where none was)."""
    done = [r for r in rows if r.model == group.model and r.measured]
    build = max((r.build_s for r in done), default=0.0)
    calls = sum(
        max((r.seconds_per_call for r in done if r.batch == batch), default=0.0) * (max(warmup, 1) + iterations)
        for batch in group.batches
    )
    return build + calls + (COMPILE_ALLOWANCE_S if group.rung.compiles else 0.0)


@dataclass(frozen=True)
class Context:
    """What every row of one run shares: where it ran, with what, and what it costs where."""

    device: str
    driver: str
    versions: str
    commit: str
    started: datetime.datetime
    measured_gpu: str | None
    prices: dict[str, PinnedInstance]
    prices_source: str
    shapes: dict[str, Shape]
    dry_run: bool


def headline_table(rows: Sequence[Row], ctx: Context) -> str:
    """The headline rows with the cost on each preset's pinned instance."""
    table_rows: list[list[object]] = []
    for row in rows:
        shape = ctx.shapes[row.model]
        pinned = ctx.prices.get(row.model)
        cells: list[object] = [
            MODELS[row.model].title,
            f"{shape.width}x{shape.height}",
            shape.steps,
            row.batch,
        ]
        if not row.measured:
            table_rows.append([*cells, row.status, "", "", "", "", "", "", ""])
            continue
        cost = None if pinned is None else estimate(row.seconds_per_image, ctx.measured_gpu, pinned)
        table_rows.append(
            [
                *cells,
                f"{row.seconds_per_call:.3g} ({min(row.seconds):.3g}-{max(row.seconds):.3g})",
                row.seconds_per_image,
                1 / row.seconds_per_image,
                "n/a" if row.peak_gib is None else f"{row.peak_gib:.1f}",
                "no price" if pinned is None else pinned.instance,
                "" if pinned is None else f"{pinned.usd_per_hour:g}",
                "n/a" if cost is None else f"{cost.seconds_per_image:.3g} (estimate)",
                "n/a" if cost is None else f"{cost.usd_per_1000_images:.3g} (estimate)",
            ]
        )
    headers = [
        "model",
        "size",
        "steps",
        "batch",
        "s/call median (min-max)",
        "s/image",
        "images/s",
        "peak GiB",
        "pinned instance",
        "$/hour",
        "s/image there",
        "$/1,000 images there",
    ]
    return format_table(headers, table_rows)


def ladder_table(rows: Sequence[Row]) -> str:
    """The ladder rows beside each model's eager batch-1 row."""
    eager = {r.model: r for r in rows if r.headline and r.batch == 1 and r.measured}
    table_rows: list[list[object]] = []
    for name in MODELS:
        for row in [r for r in rows if r.model == name and r.batch == 1]:
            base = eager.get(name)
            if row.measured:
                ratio: object = base.seconds_per_image / row.seconds_per_image if base else "n/a"
                table_rows.append([MODELS[name].title, row.rung, row.applied, row.seconds_per_image, ratio, "measured"])
            else:
                table_rows.append([MODELS[name].title, row.rung, "", "", "", row.status])
    return format_table(["model", "rung", "applied steps", "s/image", "x eager", "status"], table_rows)


def _titles() -> str:
    titles = [model.title for model in MODELS.values()]
    return ", ".join(titles[:-1]) + " and " + titles[-1]


def section(rows: Sequence[Row], ctx: Context, args: argparse.Namespace, elapsed_s: float) -> str:
    """The whole results section: provenance, the headline table, the ladder table."""
    what = "tiny configs on the CPU, two steps: a check of the path, not a measurement" if ctx.dry_run else None
    title = f"### Headline image figures on {ctx.device}: eager bf16, full-size random-weight pipelines"
    if what:
        title = f"### Dry run of the GPU benchmark on {ctx.device} ({what})"
    scaled = ctx.measured_gpu or "an unrecognised GPU (no estimate; --scale-from names one)"
    command = "python -m app.bench gpu" + (" --dry-run" if ctx.dry_run else "")
    if args.no_ladder:
        command += " --no-ladder"
    lines = [
        title,
        "",
        f"- Measured {ctx.started:%Y-%m-%d %H:%M} UTC at commit {ctx.commit}; driver {ctx.driver}; {ctx.versions}.",
        f"- Pipelines: {_titles()} built from their published configs "
        "(`app/bench/gpu_configs/`, sources in `app/bench/gpu_models.py`) with random weights, on the device in "
        'bf16, one at a time; `output_type="pt"`: the VAE decode is timed, no PNG or PIL conversion (random weights '
        "may give NaN pixels, which change no timing).",
        f"- Each row: {args.iterations} timed calls after {max(args.warmup, 1)} untimed one(s) at the row's batch; "
        "s/image is the median call over the batch; peak GiB is the device's allocated peak.",
        f"- Cost: the on-demand price of the instance each preset's NVIDIA pod is pinned to ({ctx.prices_source}); "
        f"the seconds per image there are an estimate, scaled from {scaled} by the ratio of dense bf16 peaks "
        "(`app/bench/gpu_costs.py`).",
        f"- Command: `make bench-gpu` (`{command}`); this run took {elapsed_s:.0f} s of its {args.budget_s:g} s "
        "budget.",
        "",
        headline_table([r for r in rows if r.headline], ctx),
    ]
    if not args.no_ladder:
        lines += [
            "",
            "Speed ladder, batch 1: each rung adds one setting of `app/backends/cuda_tuning.py` to the one above it "
            "(plain attention is below the eager row); a rung whose estimate does not fit the budget is skipped.",
            "",
            ladder_table(rows),
        ]
    return "\n".join(lines)


def _device(dry_run: bool) -> Any:
    import torch

    if dry_run:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit(
            "no CUDA device: `python -m app.bench gpu` measures a GPU (--dry-run checks the path on a CPU)"
        )
    return torch.device("cuda")


def _rows_of(groups: Sequence[Group]) -> list[tuple[Group, list[Row]]]:
    return [(g, [Row(g.model, g.rung.name, b, g.headline) for b in g.batches]) for g in groups]


def _prices(path: Path) -> tuple[dict[str, PinnedInstance], str]:
    if not path.is_file():
        return {}, f"no prices: {path} is missing (make bench-gpu-wheels writes it)"
    return read_prices(path)


def run(args: argparse.Namespace) -> int:
    """Measure the planned rows within the budget, writing the section after each pipeline."""
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()  # one "kept in float32: []" notice per cast component otherwise
    started = time.perf_counter()
    settings = load_settings()
    device = _device(args.dry_run)
    name = device_name(device)
    prices, prices_source = _prices(args.prices)
    ctx = Context(
        device=name,
        driver=driver_version(),
        versions=software_versions(),
        commit=git_commit(),
        started=datetime.datetime.now(datetime.UTC),
        measured_gpu=gpu_of_device(name) or args.scale_from,
        prices=prices,
        prices_source=prices_source,
        shapes=DRY_SHAPES if args.dry_run else FULL_SHAPES,
        dry_run=args.dry_run,
    )
    planned = _rows_of(plan(not args.no_ladder, args.compile_mode))
    rows = [row for _, group_rows in planned for row in group_rows]
    key = f"gpu {name}" + (" dry-run" if args.dry_run else "")

    def write() -> None:
        body = section(rows, ctx, args, time.perf_counter() - started)
        if args.results_file is not None:
            update_section(args.results_file, key, body)
        if args.json is not None:
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8")

    for group, group_rows in planned:
        left = args.budget_s - (time.perf_counter() - started)
        needed = expected_seconds(group, rows, args.warmup, args.iterations)
        if not group.headline and needed > left:
            for row in group_rows:
                row.status = f"skipped: needs about {needed:.0f} s, {max(left, 0):.0f} s of the budget left"
            continue
        print(f"{group.model} {group.rung.name} batches {group.batches}: building", flush=True)
        try:
            measure_group(group, group_rows, ctx.shapes[group.model], settings, args, device)
        except Exception as error:
            # One failed pipeline (out of memory, a compile error) must not end an unattended run: its rows say why.
            for row in (r for r in group_rows if not r.measured):
                row.status = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
        for row in group_rows:
            print(
                f"  batch {row.batch}: {row.status}"
                + (f", {row.seconds_per_image:.3g} s/image" if row.measured else "")
            )
        write()
    write()
    print(section(rows, ctx, args, time.perf_counter() - started))
    return 0
