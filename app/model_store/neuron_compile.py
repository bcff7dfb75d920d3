"""Compile a Stable Diffusion model for Neuron once and publish it to the model store.

    python -m app.model_store.neuron_compile compile --bucket B --model-id org/name --sdk-version 2.31.1 \
        --batch-size 1 --height 512 --width 512
    python -m app.model_store.neuron_compile wait --bucket B --prefix compiled/.../ [--timeout-s 7200]

`compile` reads the weights from `models/<slug>/` in the bucket (the deploy staged them there, so no
third-party hub is involved), or from the model id itself when it is an s3:// URI, compiles them
with optimum-neuron for one static shape, uploads the artifacts to
`compiled/<slug>/neuron-sdk-<ver>/b<batch>-h<height>-w<width>/` and writes a completion marker last.
If the marker is already there it does nothing, so re-running the Job is cheap.
`wait` blocks until that marker exists: the Neuron Deployment runs it as an init container so its
pods do not crash-loop while the first compile is still running.

optimum-neuron only installs from AWS's package index (it is in the Neuron image), so it is
imported lazily inside `optimum_compile`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common.model_store.download import download_s3_prefix
from common.model_store.layout import COMPLETE_MARKER, CompileShape, compiled_prefix, weights_location
from common.model_store.marker import MarkerTimeout, marker_exists, wait_for_marker, write_marker
from common.model_store.upload import upload_files

log = logging.getLogger("neuron_compile")

CompileFn = Callable[[Path, CompileShape, Path], None]


class CompileError(RuntimeError):
    """The compile cannot proceed; the message says what to do."""


def optimum_compile(weights_dir: Path, shape: CompileShape, out_dir: Path) -> None:
    """Export the diffusers pipeline in `weights_dir` to Neuron for `shape` and save it to `out_dir`."""
    try:
        from optimum.neuron import NeuronStableDiffusionPipeline
    except ImportError as exc:  # only the Neuron image has it
        raise CompileError(
            "optimum-neuron is not installed: run this inside the Neuron image (it comes from AWS's package index)"
        ) from exc
    pipeline = NeuronStableDiffusionPipeline.from_pretrained(
        str(weights_dir),
        export=True,
        batch_size=shape.batch_size,
        height=shape.height,
        width=shape.width,
        num_images_per_prompt=1,
        # bf16 matmuls: the usual speed/quality trade-off for SD on Inferentia2.
        auto_cast="matmul",
        auto_cast_type="bf16",
        # No compile cache: unless disabled, optimum-neuron 0.4.5 looks the compiled model up in the Hub
        # cache repository aws-neuron/optimum-neuron-cache first (modeling_diffusion.py lines 922-985:
        # `if not disable_neuron_cache:` ... create_hub_compile_cache_proxy()), and with HF_HUB_OFFLINE=1
        # huggingface-hub refuses that call, which cache/hub_cache.py lines 100-104 turn into a ValueError.
        # It is also the only way to skip the lookup: 0.4.5 reads no environment variable for it. The
        # artifacts are published to the model store instead (convert.py line 419 skips the local cache too).
        disable_neuron_cache=True,
        # The compiler's intermediate files (HLO, NEFF with the weights inlined) go beside the other
        # scratch files, on the Job's large scratch volume, not into a temporary folder of its own.
        compiler_workdir=str(compiler_workdir(out_dir)),
    )
    pipeline.save_pretrained(str(out_dir))


def compiler_workdir(out_dir: Path) -> Path:
    """Where neuronx-cc keeps its intermediate files: a sibling of the output folder."""
    return out_dir.with_name("neuronx-cc")


def is_compiled(s3: Any, bucket: str, prefix: str) -> bool:
    """True when the completion marker exists under `prefix`."""
    return marker_exists(s3, bucket, prefix)


def upload_dir(s3: Any, bucket: str, src: Path, prefix: str) -> list[str]:
    """Upload every file under `src` below `prefix`; returns the relative paths uploaded."""
    return upload_files(s3, bucket, src, (p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()), prefix)


def compile_and_publish(
    s3: Any,
    *,
    bucket: str,
    model_id: str,
    sdk_version: str,
    shape: CompileShape,
    work_dir: Path,
    compile_fn: CompileFn = optimum_compile,
) -> str:
    """Compile unless already published; return the compiled prefix."""
    prefix = compiled_prefix(model_id, sdk_version, shape)
    if is_compiled(s3, bucket, prefix):
        log.info("already compiled: s3://%s/%s%s exists, nothing to do", bucket, prefix, COMPLETE_MARKER)
        return prefix
    weights_bucket, source = weights_location(model_id, bucket)
    weights_dir = work_dir / "weights"
    out_dir = work_dir / "compiled"
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        download_s3_prefix(weights_bucket, source, weights_dir, client=s3)
    except FileNotFoundError:
        raise CompileError(
            f"no weights under s3://{weights_bucket}/{source}: the deploy stages them (docs/serving.md, "
            "'The model store'); run it again, or upload your own there"
        ) from None
    log.info("compiling %s for %s with Neuron SDK %s", model_id, shape.key, sdk_version)
    compile_fn(weights_dir, shape, out_dir)
    files = upload_dir(s3, bucket, out_dir, prefix)
    if not files:
        raise CompileError(f"the compile wrote nothing to {out_dir}")
    marker = {
        "model_id": model_id,
        "neuron_sdk_version": sdk_version,
        "batch_size": shape.batch_size,
        "height": shape.height,
        "width": shape.width,
        "files": files,
    }
    # The marker goes last: readers treat the prefix as complete only once it exists.
    write_marker(s3, bucket, prefix, marker)
    log.info("published %d files to s3://%s/%s", len(files), bucket, prefix)
    return prefix


def wait_for_compiled(
    s3: Any,
    *,
    bucket: str,
    prefix: str,
    timeout_s: float,
    poll_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Block until the completion marker exists under `prefix`, or raise CompileError on timeout."""
    try:
        wait_for_marker(s3, bucket=bucket, prefix=prefix, timeout_s=timeout_s, poll_s=poll_s, sleep=sleep, clock=clock)
    except MarkerTimeout as exc:
        raise CompileError(str(exc)) from None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: `compile` and `wait` sub-commands."""
    parser = argparse.ArgumentParser(
        prog="python -m app.model_store.neuron_compile", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile for one static shape and upload (skipped if already there)")
    c.add_argument("--bucket", required=True)
    c.add_argument("--model-id", required=True, help="org/name (weights in models/<slug>/) or s3://bucket/prefix")
    c.add_argument("--sdk-version", required=True, help="Neuron SDK version, part of the artifact key")
    c.add_argument("--batch-size", type=int, required=True)
    c.add_argument("--height", type=int, required=True)
    c.add_argument("--width", type=int, required=True)
    c.add_argument("--work-dir", type=Path, default=None, help="scratch space (default: a temp dir)")
    w = sub.add_parser("wait", help="block until a compiled prefix is complete")
    w.add_argument("--bucket", required=True)
    w.add_argument("--prefix", required=True)
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
        if args.command == "wait":
            wait_for_compiled(s3, bucket=args.bucket, prefix=args.prefix, timeout_s=args.timeout_s, poll_s=args.poll_s)
            return 0
        shape = CompileShape(args.batch_size, args.height, args.width)
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
                shape=shape,
                work_dir=Path(work_dir),
            )
    except (CompileError, ValueError) as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
