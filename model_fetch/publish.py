"""Publish a folder to the model store: every file below a prefix, then the completion marker.

    python -m model_fetch.publish --bucket B --prefix compiled-llm/<slug>/<key>/ --src /scratch/artifacts \
        [--meta key=value ...]

The LLM's Neuron compile Job runs this as its last step, after the compile wrote the artifacts into `--src`.
The marker (common/model_store/marker.py) goes last, so a reader that sees it sees every file; it records the
files and the `--meta` pairs (what the artifacts were compiled for). A prefix that already has its marker is
left as it is (a re-run publishes nothing twice), and an empty or missing `--src` is an error, never a
marker over nothing: that would make every serving pod load an empty directory.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.model_store.marker import marker_exists, write_marker
from common.model_store.upload import upload_files

log = logging.getLogger("model_fetch.publish")


class PublishError(RuntimeError):
    """Nothing to publish, or an unusable argument; the message says which."""


def publish(s3: Any, *, bucket: str, prefix: str, src: Path, meta: dict[str, str]) -> list[str]:
    """Upload every file under `src` below `prefix`, then the marker; returns the files uploaded (none when the
    marker was already there)."""
    if not prefix.endswith("/"):
        raise PublishError(f"--prefix {prefix!r} must end in '/': the files go below it")
    if marker_exists(s3, bucket, prefix):
        log.info("already published: s3://%s/%s has its marker, nothing to do", bucket, prefix)
        return []
    if not src.is_dir():
        raise PublishError(f"--src {src} is not a directory: the compile did not write its artifacts there")
    files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    if not files:
        raise PublishError(f"--src {src} holds no files: the compile wrote nothing, so nothing is published")
    uploaded = upload_files(s3, bucket, src, files, prefix)
    # The marker goes last: readers treat the prefix as complete only once it exists.
    write_marker(s3, bucket, prefix, {**meta, "files": uploaded})
    log.info("published %d files to s3://%s/%s", len(uploaded), bucket, prefix)
    return uploaded


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key, value


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m model_fetch.publish", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True, help="the store prefix, ending in '/'")
    parser.add_argument("--src", type=Path, required=True, help="the folder whose files are published")
    parser.add_argument("--meta", type=_pair, action="append", default=[], help="key=value for the marker")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None, s3: Any = None) -> int:
    """Publish; returns the exit status (an error is one readable line)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if s3 is None:
        import boto3

        s3 = boto3.client("s3")
    try:
        publish(s3, bucket=args.bucket, prefix=args.prefix, src=args.src, meta=dict(args.meta))
    except PublishError as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
