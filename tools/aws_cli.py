"""The AWS CLI and kubectl through subprocesses: the commands users already have credentials and plugins for
(the Session Manager plugin, the kubeconfig's `aws eks get-token`), so what these tools do is what users could
type themselves."""

from __future__ import annotations

import json
import subprocess
from typing import Any


class CommandError(Exception):
    """A command failed or is missing; the message is the one line to print."""


def run(command: list[str]) -> str:
    """Run `command`; its standard output, or a CommandError with its last line of error output."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise CommandError(f"{command[0]} not found: install it (docs/platform.md lists the tools)") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exited {result.returncode}"
        raise CommandError(f"{' '.join(command[:3])}: {detail}")
    return result.stdout


def aws_json(*args: str) -> Any:
    """`aws ... --output json`, parsed."""
    out = run(["aws", *args, "--output", "json"])
    try:
        return json.loads(out)
    except ValueError as exc:
        raise CommandError(f"aws {' '.join(args[:2])} did not answer JSON: {out[:120]!r}") from exc
