"""`python -m model_fetch`: the command line. Exit status 0 when every prefix is in place, 1 when the store
could not be read or a prefix holds nothing, 2 for bad arguments, 3 when the awaited marker did not appear in
time; each failure is one log line saying which."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.logs import configure_logging
from common.model_store.marker import MarkerTimeout, marker_exists, wait_for_marker
from model_fetch.fetch import Transfer, fetch, log

EXIT_FAILED = 1
EXIT_USAGE = 2  # argparse's own status for bad arguments
EXIT_TIMEOUT = 3


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line; `--prefix`/`--dest` pairs are matched in order."""
    parser = argparse.ArgumentParser(
        prog="python -m model_fetch",
        description="Copy model files from the model store onto a local folder, once they are complete.",
    )
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", action="append", required=True, help="an S3 prefix to copy (repeatable)")
    parser.add_argument("--dest", action="append", required=True, type=Path, help="its folder, one per --prefix")
    parser.add_argument("--wait-marker-prefix", help="first wait for <this prefix>_COMPLETE.json")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="how long to wait for the marker")
    parser.add_argument("--poll-s", type=float, default=15.0, help="how often to look for it")
    parser.add_argument(
        "--skip-if-marker-prefix",
        help="when <this prefix>_COMPLETE.json already exists, fetch nothing and write --skipped-flag instead",
    )
    parser.add_argument("--skipped-flag", type=Path, help="the file that tells the next step nothing was fetched")
    args = parser.parse_args(list(argv))
    if len(args.prefix) != len(args.dest):
        parser.error(f"{len(args.prefix)} --prefix but {len(args.dest)} --dest: give one folder per prefix")
    if not all(p.strip("/") for p in args.prefix):
        parser.error("--prefix must not be empty: name the model's folder in the bucket")
    if bool(args.skip_if_marker_prefix) != bool(args.skipped_flag):
        parser.error("--skip-if-marker-prefix and --skipped-flag go together")
    if args.timeout_s < 0 or args.poll_s <= 0:
        parser.error("--timeout-s must be at least 0 and --poll-s above 0")
    return args


def main(argv: Sequence[str] | None = None, s3: Any = None) -> int:
    """Wait (if asked), fetch, and return the exit status."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging()
    from botocore.exceptions import BotoCoreError, ClientError

    if s3 is None:
        import boto3

        s3 = boto3.client("s3")
    try:
        if args.skip_if_marker_prefix and marker_exists(s3, args.bucket, args.skip_if_marker_prefix):
            log.info("s3://%s/%s is already complete: nothing to fetch", args.bucket, args.skip_if_marker_prefix)
            args.skipped_flag.write_text(args.skip_if_marker_prefix, encoding="utf-8")
            return 0
        if args.wait_marker_prefix:
            wait_for_marker(
                s3, bucket=args.bucket, prefix=args.wait_marker_prefix, timeout_s=args.timeout_s, poll_s=args.poll_s
            )
        fetch(s3, args.bucket, [Transfer(p, d) for p, d in zip(args.prefix, args.dest, strict=True)])
    except MarkerTimeout as exc:
        log.error("%s", exc)
        return EXIT_TIMEOUT
    except (FileNotFoundError, ValueError, OSError, ClientError, BotoCoreError) as exc:
        log.error("fetching from s3://%s failed: %s", args.bucket, exc)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
