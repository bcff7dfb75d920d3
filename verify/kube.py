"""kubectl through a subprocess with JSON output, so that the checks use the user's own kubeconfig."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 60


class KubeError(RuntimeError):
    """kubectl failed; the message is its last line of error output."""


@dataclass(frozen=True)
class Kubectl:
    """kubectl in the serving namespace (another namespace per call where a check needs it)."""

    namespace: str
    binary: str = "kubectl"

    def run(self, *args: str, namespace: str | None = None) -> str:
        """Run kubectl; its standard output, or a KubeError carrying its last error line."""
        command = [self.binary, "--namespace", namespace or self.namespace, *args]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KubeError(f"kubectl {' '.join(args[:2])}: {exc}") from exc
        if result.returncode != 0:  # client-go's log lines come first; kubectl's own error is the last line
            lines = result.stderr.strip().splitlines()
            raise KubeError(lines[-1] if lines else f"kubectl {' '.join(args[:2])} exited {result.returncode}")
        return result.stdout

    def get(self, *args: str, namespace: str | None = None) -> dict[str, Any]:
        """`kubectl get ... -o json`, parsed."""
        out = self.run("get", *args, "--output", "json", namespace=namespace)
        try:
            parsed: dict[str, Any] = json.loads(out)
        except json.JSONDecodeError as exc:
            raise KubeError(f"kubectl get {' '.join(args[:2])} did not answer JSON: {out[:120]!r}") from exc
        return parsed

    def items(self, kind: str, *selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The objects of one kind (optionally `--selector ...`), as a list."""
        return list(self.get(kind, *selector, namespace=namespace).get("items", []))
