#!/usr/bin/env python3
"""CDK entry point: `cdk synth` / `cdk deploy --all` run this (see cdk.json and docs/platform.md)."""

from __future__ import annotations

import sys

import aws_cdk as cdk

from cdk.build import build_app, read_config
from cdk.config import ConfigError


def main() -> None:
    """Read the settings, build the stacks, synthesize; a bad setting ends with one readable line."""
    app = cdk.App()
    try:
        config = read_config(app)
    except ConfigError as exc:
        sys.exit(f"configuration error: {exc}")
    build_app(app, config)
    app.synth()


if __name__ == "__main__":
    main()
