"""The Node that package.json pins, first on PATH for everything the tests spawn.

The Python CDK's jsii runtime starts `node` from PATH (as do the CRD validators). `make` puts
`node_modules/.bin` first; this does the same when pytest is started directly, so a synth under
test runs on the pinned Node 22 and never on an older system Node that jsii no longer supports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = REPO_ROOT / "node_modules" / ".bin"


def pinned_node_versions() -> dict[str, str]:
    """package.json's Node platform packages and their versions (one per OS/CPU, npm installs the fitting one)."""
    package = json.loads((REPO_ROOT / "package.json").read_text())
    return dict(package.get("optionalDependencies", {}))


def use_pinned_node() -> None:
    """Prepend `node_modules/.bin` to PATH once, where `npm ci` has installed the pinned Node."""
    path = os.environ.get("PATH", "")
    if (NODE_BIN / "node").exists() and not path.startswith(f"{NODE_BIN}{os.pathsep}"):
        os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{path}"
