#!/usr/bin/env python3
"""CDK entry point: `cdk synth` / `cdk deploy --all` run this (see cdk.json and docs/platform.md)."""

from __future__ import annotations

import sys

import aws_cdk as cdk

from cdk.build import build_app, read_config
from cdk.config import ConfigError

DISABLE_METADATA_STACK_TRACE = "aws:cdk:disable-stack-trace"  # aws-cdk-lib cx-api's constant (not in its Python API)


def main() -> None:
    """Read the settings, build the stacks, synthesize; a bad setting ends with one readable line."""
    # A warning's stack trace would be a frame of the jsii runtime (program.js), never a line of this app.
    app = cdk.App(context={DISABLE_METADATA_STACK_TRACE: True})
    try:
        config = read_config(app)
        # Building checks what only the built manifests show (a pod against its instance: cdk/serving/pod_fit.py).
        build_app(app, config)
    except ConfigError as exc:
        sys.exit(f"configuration error: {exc}")
    app.synth()


if __name__ == "__main__":
    main()
