"""Compile an image model for Neuron once, for every image size served, and publish it to the model store.

    python -m app.model_store.neuron_compile compile --bucket B --model-id org/name --sdk-version 2.26.1 \
        --batch-size 1 --shape 1024x1024 --shape 896x1152 --shape 1152x896 --tensor-parallel-size 1 \
        [--lora ink:0.8 --lora wash]
    python -m app.model_store.neuron_compile wait --bucket B --prefix compiled/.../ --shape 1024x1024 ... \
        [--timeout-s 7200]

`compile` reads the weights from `models/<slug>/` in the bucket (the deploy staged them there, so no
third-party hub is involved), or from the model id itself when it is an s3:// URI, tells the family from
their model_index.json (app/models/families.py), compiles them with that family's optimum-neuron pipeline
once per static size, and uploads each size's artifacts to
`compiled/<slug>/neuron-sdk-<ver>/b<batch>-tp<N>/<W>x<H>/`, with that folder's completion marker last.
A size whose marker is already there is skipped, so re-running the Job is cheap and adding a size to a
deployment compiles only the new one. Each `--lora NAME:SCALE` fuses the adapter `loras/<slug>/NAME.safetensors`
of the store into the weights before tracing (optimum-neuron's LoRA export arguments); the compiled prefix then
ends in `-lora-<hash>` of the fused set, so other adapters are another compile. `wait` blocks until the marker
of every size it is given exists:
the Neuron Deployment runs it as an init container so its pods do not crash-loop while a compile runs.

optimum-neuron only installs from AWS's package index (it is in the Neuron image), so it is
imported lazily inside `optimum_compile`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.loras import ADAPTER_SUFFIX
from app.models.families import FLUX_SCHNELL, SD, SDXL, Family, UnknownFamily, family_of
from common.lora_keys import LoraSet, fused_variant, parse_lora_keys
from common.model_store.download import download_s3_prefix
from common.model_store.layout import (
    COMPLETE_MARKER,
    CompileShape,
    ImageSize,
    compiled_prefix,
    loras_prefix,
    parse_sizes,
    shape_prefix,
    weights_location,
)
from common.model_store.marker import MarkerTimeout, marker_exists, wait_for_marker, write_marker
from common.model_store.upload import upload_files

log = logging.getLogger("neuron_compile")

# The optimum-neuron pipeline class per family (optimum-neuron 0.4.5, optimum/neuron/modeling_diffusion.py:
# NeuronStableDiffusionPipeline, NeuronStableDiffusionXLPipeline, NeuronFluxPipeline; 0.4.5 has no class
# that picks by model_index.json, so the family, read from it, picks here). app/backends/neuron.py loads
# with the same classes.
PIPELINE_CLASSES: dict[str, str] = {
    SD.name: "NeuronStableDiffusionPipeline",
    SDXL.name: "NeuronStableDiffusionXLPipeline",
    FLUX_SCHNELL.name: "NeuronFluxPipeline",
}


@dataclass(frozen=True)
class ExportSpec:
    """What one export compiles: the family's pipeline, one static shape, the tensor parallel degree."""

    family: Family
    shape: CompileShape
    tensor_parallel_size: int
    loras: LoraSet = ()  # adapters fused into the weights before tracing
    lora_dir: Path | None = None  # the folder holding each fused adapter's NAME.safetensors


CompileFn = Callable[[Path, ExportSpec, Path], None]


class CompileError(RuntimeError):
    """The compile cannot proceed; the message says what to do."""


def pipeline_class_name(family: Family) -> str:
    """The optimum-neuron class that exports and loads a model of `family`, or UnknownFamily where 0.4.5 has
    none (FLUX.2, Z-Image, Qwen-Image: its `modeling_diffusion` exports name no such pipeline)."""
    try:
        return PIPELINE_CLASSES[family.name]
    except KeyError:
        raise UnknownFamily(
            f"optimum-neuron 0.4.5 has no pipeline for {family.title} models: serve them on NVIDIA or the CPU "
            f"(Neuron compiles {', '.join(sorted(PIPELINE_CLASSES))})"
        ) from None


def check_served_variant(model_dir: Path, family: Family) -> None:
    """Refuse a FluxPipeline folder whose transformer embeds guidance (FLUX.1-dev and its kind), as the CPU/CUDA
    backends do (app/backends/diffusers_backend.py): the flux family's facts are FLUX.1-schnell's. Read from the
    transformer's config.json, which weights and compiled folders both hold, so no compile or load starts."""
    config = model_dir / "transformer" / "config.json"
    if (
        family is FLUX_SCHNELL
        and config.is_file()
        and json.loads(config.read_text(encoding="utf-8")).get("guidance_embeds")
    ):
        raise UnknownFamily(
            f"{model_dir}: this FluxPipeline's transformer embeds guidance (FLUX.1-dev-like): the service "
            "serves guidance-distilled FLUX.1-schnell models only"
        )


def export_arguments(spec: ExportSpec, out_dir: Path) -> dict[str, Any]:
    """The keyword arguments of `<NeuronPipeline>.from_pretrained(weights, **these)` for one export.

    Each name is a parameter of optimum-neuron 0.4.5's NeuronDiffusionPipelineBase._export or a field of its
    InputShapesArguments (optimum/neuron/utils/argument_utils.py); the contract run checks that at the pin.
    """
    arguments: dict[str, Any] = {
        "export": True,
        "batch_size": spec.shape.batch_size,
        "height": spec.shape.height,
        "width": spec.shape.width,
        "num_images_per_prompt": 1,
        # Shards the UNet/transformer over this many NeuronCores; the loader reads it back from the compiled
        # config (modeling_diffusion.py set_parallel_mode), so the service needs no argument for it.
        "tensor_parallel_size": spec.tensor_parallel_size,
        # No compile cache: unless disabled, optimum-neuron 0.4.5 looks the compiled model up in the Hub
        # cache repository aws-neuron/optimum-neuron-cache first (modeling_diffusion.py lines 922-985:
        # `if not disable_neuron_cache:` ... create_hub_compile_cache_proxy()), and with HF_HUB_OFFLINE=1
        # huggingface-hub refuses that call, which cache/hub_cache.py lines 100-104 turn into a ValueError.
        # It is also the only way to skip the lookup: 0.4.5 reads no environment variable for it. The
        # artifacts are published to the model store instead (convert.py line 419 skips the local cache too).
        "disable_neuron_cache": True,
        # The compiler's intermediate files (HLO, NEFF with the weights inlined) go beside the other
        # scratch files, on the Job's large scratch volume, not into a temporary folder of its own.
        "compiler_workdir": str(compiler_workdir(out_dir)),
    }
    if spec.loras and spec.lora_dir is not None:
        # optimum-neuron 0.4.5 exporters/neuron/utils.py _load_lora_weights_to_pipeline: load_lora_weights per
        # adapter (local folder + weight name), set_adapters with the scales, then fuse_lora before tracing;
        # the parameters are optimum/neuron/utils/argument_utils.py LoRAAdapterArguments' lora_* fields.
        arguments.update(
            lora_model_ids=[str(spec.lora_dir)] * len(spec.loras),
            lora_weight_names=[ref.name + ADAPTER_SUFFIX for ref in spec.loras],
            lora_adapter_names=[ref.name for ref in spec.loras],
            lora_scales=[ref.scale for ref in spec.loras],
        )
    if spec.family is FLUX_SCHNELL:
        import torch

        # optimum-neuron 0.4.5 docs/source/model_doc/diffusers/flux.mdx: Flux exports in bf16 with auto_cast
        # "none" (the weights are bf16 already; the CLI turns "none" into None, exporters/neuron/__main__.py
        # line 97, and convert.py then passes `--auto-cast none`), and schnell with sequence_length 256 (its
        # T5 prompt length, which the compiled T5 encoder then fixes).
        arguments.update(torch_dtype=torch.bfloat16, auto_cast=None, sequence_length=FLUX_SCHNELL.max_sequence_length)
    else:
        # bf16 matmuls: the usual speed/quality trade-off for SD and SDXL on Inferentia2
        # (stable_diffusion.mdx and stable_diffusion_xl.mdx at 0.4.5: compiler_args auto_cast matmul, bf16).
        arguments.update(auto_cast="matmul", auto_cast_type="bf16")
    return arguments


def optimum_compile(weights_dir: Path, spec: ExportSpec, out_dir: Path) -> None:
    """Export the diffusers pipeline in `weights_dir` to Neuron for `spec` and save it to `out_dir`."""
    try:
        import optimum.neuron
    except ImportError as exc:  # only the Neuron image has it
        raise CompileError(
            "optimum-neuron is not installed: run this inside the Neuron image (it comes from AWS's package index)"
        ) from exc
    pipeline_class = getattr(optimum.neuron, pipeline_class_name(spec.family))
    pipeline = pipeline_class.from_pretrained(str(weights_dir), **export_arguments(spec, out_dir))
    pipeline.save_pretrained(str(out_dir))


def compiler_workdir(out_dir: Path) -> Path:
    """Where neuronx-cc keeps its intermediate files: a sibling of the output folder."""
    return out_dir.with_name("neuronx-cc")


def upload_dir(s3: Any, bucket: str, src: Path, prefix: str) -> list[str]:
    """Upload every file under `src` below `prefix`; returns the relative paths uploaded."""
    return upload_files(s3, bucket, src, (p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()), prefix)


def missing_sizes(s3: Any, bucket: str, prefix: str, sizes: Sequence[ImageSize]) -> list[ImageSize]:
    """The sizes whose folder under `prefix` has no completion marker yet, in the order given."""
    return [size for size in sizes if not marker_exists(s3, bucket, shape_prefix(prefix, size))]


def _download_weights(s3: Any, model_id: str, bucket: str, weights_dir: Path) -> Family:
    weights_bucket, source = weights_location(model_id, bucket)
    try:
        download_s3_prefix(weights_bucket, source, weights_dir, client=s3)
    except FileNotFoundError:
        raise CompileError(
            f"no weights under s3://{weights_bucket}/{source}: the deploy stages them (docs/serving.md, "
            "'The model store'); run it again, or upload your own there"
        ) from None
    try:
        family = family_of(weights_dir)
        check_served_variant(weights_dir, family)
        return family
    except UnknownFamily as exc:
        raise CompileError(f"s3://{weights_bucket}/{source}: {exc}") from None


def _download_loras(s3: Any, model_id: str, bucket: str, loras: LoraSet, lora_dir: Path) -> None:
    """Fetch the fused adapters from the store's `loras/<slug>/`; CompileError naming any that is not there."""
    prefix = loras_prefix(model_id)
    for ref in loras:
        target = lora_dir / (ref.name + ADAPTER_SUFFIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            s3.download_file(bucket, prefix + target.name, str(target))
        except Exception as exc:  # botocore's ClientError (404) or a missing bucket: say which adapter
            raise CompileError(
                f"adapter {ref.name!r} is not at s3://{bucket}/{prefix}{target.name} ({type(exc).__name__}): "
                "upload it there (docs/serving.md, 'LoRA adapters')"
            ) from None


def compile_and_publish(
    s3: Any,
    *,
    bucket: str,
    model_id: str,
    sdk_version: str,
    batch_size: int,
    sizes: Sequence[ImageSize],
    tensor_parallel_size: int,
    work_dir: Path,
    loras: LoraSet = (),
    compile_fn: CompileFn | None = None,
) -> str:
    """Compile every size not yet published, one after the other; return the compiled prefix.

    Each size's folder is uploaded and marked complete before the next compile starts, and its local files
    are removed, so a Job that dies part-way keeps what it finished and needs scratch space for one size.
    `compile_fn` defaults to `optimum_compile`, looked up at call time.
    """
    compile_fn = compile_fn or optimum_compile
    prefix = compiled_prefix(model_id, sdk_version, batch_size, tensor_parallel_size, fused_variant(loras))
    pending = missing_sizes(s3, bucket, prefix, sizes)
    if not pending:
        log.info("already compiled: every size under s3://%s/%s has its %s", bucket, prefix, COMPLETE_MARKER)
        return prefix
    weights_dir = work_dir / "weights"
    family = _download_weights(s3, model_id, bucket, weights_dir)
    lora_dir = work_dir / "loras"
    _download_loras(s3, model_id, bucket, loras, lora_dir)
    # A size the family cannot generate would fail deep inside the export, minutes in: say so first.
    problems = [f"{size.key}: {p}" for size in pending for p in family.size_problems(size.width, size.height)]
    if problems:
        raise CompileError("; ".join(problems))
    for size in pending:
        spec = ExportSpec(
            family,
            CompileShape(batch_size, size.height, size.width),
            tensor_parallel_size,
            loras,
            lora_dir if loras else None,
        )
        out_dir = work_dir / "compiled" / size.key
        out_dir.mkdir(parents=True, exist_ok=True)
        log.info(
            "compiling %s (%s) for %s, batch %d, tensor parallel %d, with Neuron SDK %s",
            model_id,
            family.name,
            size.key,
            batch_size,
            tensor_parallel_size,
            sdk_version,
        )
        compile_fn(weights_dir, spec, out_dir)
        target = shape_prefix(prefix, size)
        files = upload_dir(s3, bucket, out_dir, target)
        if not files:
            raise CompileError(f"the compile wrote nothing to {out_dir}")
        marker = {
            "model_id": model_id,
            "family": family.name,
            "neuron_sdk_version": sdk_version,
            "batch_size": batch_size,
            "height": size.height,
            "width": size.width,
            "tensor_parallel_size": tensor_parallel_size,
            "loras": [{"name": ref.name, "scale": ref.scale} for ref in loras],
            "files": files,
        }
        # The marker goes last: readers treat the size's folder as complete only once it exists.
        write_marker(s3, bucket, target, marker)
        log.info("published %d files to s3://%s/%s", len(files), bucket, target)
        shutil.rmtree(out_dir)
        shutil.rmtree(compiler_workdir(out_dir), ignore_errors=True)
    return prefix


def wait_for_compiled(
    s3: Any,
    *,
    bucket: str,
    prefix: str,
    sizes: Sequence[ImageSize],
    timeout_s: float,
    poll_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Block until every size's completion marker exists under `prefix`, or raise CompileError once
    `timeout_s` has passed in all (the sizes are compiled one after another, so one deadline covers all)."""
    deadline = clock() + timeout_s
    for size in sizes:
        try:
            wait_for_marker(
                s3,
                bucket=bucket,
                prefix=shape_prefix(prefix, size),
                timeout_s=max(0.0, deadline - clock()),
                poll_s=poll_s,
                sleep=sleep,
                clock=clock,
            )
        except MarkerTimeout as exc:
            raise CompileError(f"{exc} (waited for sizes {', '.join(s.key for s in sizes)})") from None


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: `compile` and `wait` sub-commands."""
    parser = argparse.ArgumentParser(
        prog="python -m app.model_store.neuron_compile", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile each size and upload it (sizes already there are skipped)")
    c.add_argument("--bucket", required=True)
    c.add_argument("--model-id", required=True, help="org/name (weights in models/<slug>/) or s3://bucket/prefix")
    c.add_argument("--sdk-version", required=True, help="Neuron SDK version, part of the artifact key")
    c.add_argument("--batch-size", type=_positive, required=True)
    c.add_argument(
        "--shape", action="append", required=True, metavar="WxH", help="an image size to compile; repeat for more"
    )
    c.add_argument("--tensor-parallel-size", type=_positive, default=1, help="NeuronCores the UNet/transformer spans")
    c.add_argument("--work-dir", type=Path, default=None, help="scratch space (default: a temp dir)")
    c.add_argument(
        "--lora",
        action="append",
        default=[],
        metavar="NAME:SCALE",
        help="a LoRA adapter of the store's loras/<slug>/ to fuse into the weights; repeat for more",
    )
    w = sub.add_parser("wait", help="block until every given size under a compiled prefix is complete")
    w.add_argument("--bucket", required=True)
    w.add_argument("--prefix", required=True)
    w.add_argument("--shape", action="append", required=True, metavar="WxH", help="a size to wait for; repeat")
    w.add_argument("--timeout-s", type=float, default=7200.0)
    w.add_argument("--poll-s", type=float, default=15.0)
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None, s3: Any = None) -> int:
    """Run a sub-command; returns the process exit status (errors are one readable line)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if s3 is None:
        import boto3

        s3 = boto3.client("s3")
    try:
        sizes = parse_sizes(args.shape)
        if args.command == "wait":
            wait_for_compiled(
                s3, bucket=args.bucket, prefix=args.prefix, sizes=sizes, timeout_s=args.timeout_s, poll_s=args.poll_s
            )
            return 0
        work = (
            contextlib.nullcontext(args.work_dir)
            if args.work_dir is not None
            else tempfile.TemporaryDirectory(prefix="neuron-compile-")
        )
        with work as work_dir:
            compile_and_publish(
                s3,
                bucket=args.bucket,
                model_id=args.model_id,
                sdk_version=args.sdk_version,
                batch_size=args.batch_size,
                sizes=sizes,
                tensor_parallel_size=args.tensor_parallel_size,
                work_dir=Path(work_dir),
                loras=parse_lora_keys(args.lora),
            )
    except (CompileError, ValueError) as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
