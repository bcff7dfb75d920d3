"""`python -m llm_gateway.native.build`: compile relay.c for the Python that runs this, beside it.

The compiler and flags are the interpreter's own (sysconfig), as setuptools would use them, with no build
dependency to pin; llm_gateway/Dockerfile runs this on the image's base, and `make` targets run it here.
Exits 0 when the module is there and current, 1 with the compiler's message when it cannot be built.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from llm_gateway.native import SOURCE, source_digest


def module_path() -> Path:
    """Where this Python imports the compiled module from."""
    return SOURCE.with_name("_relay" + sysconfig.get_config_var("EXT_SUFFIX"))


def compile_command(output: Path) -> list[str]:
    """The compiler's command line for this Python."""
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    return [
        *compiler,
        "-O2",
        "-fPIC",
        "-shared",
        "-Wall",
        "-Werror",
        f"-I{sysconfig.get_paths()['include']}",
        f'-DSOURCE_DIGEST="{source_digest()}"',
        str(SOURCE),
        "-o",
        str(output),
    ]


def current() -> bool:
    """Whether this Python imports a module built from today's relay.c. Asked of a fresh interpreter: an extension
    module, once imported, stays in its process, so this one never imports it."""
    check = "import sys; from llm_gateway.native import load; sys.exit(load() is None)"
    done = subprocess.run([sys.executable, "-c", check], cwd=SOURCE.parents[2], capture_output=True, check=False)
    return done.returncode == 0


def build() -> str | None:
    """Compile the module unless a current one is there; None when it is, else why it could not be built."""
    if current():
        return None
    command = compile_command(module_path())
    if shutil.which(command[0]) is None:
        return f"no C compiler ({command[0]}) on PATH"
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return done.stderr.strip() or f"{command[0]} exited with {done.returncode}"
    return None if current() else f"{module_path()} was built but does not load"


def main() -> int:
    """Build, or say why not."""
    problem = build()
    if problem is not None:
        print(f"llm_gateway.native: not built: {problem}", file=sys.stderr)
        return 1
    print(f"llm_gateway.native: {module_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
