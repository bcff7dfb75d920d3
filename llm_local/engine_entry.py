"""`python -m llm_local.engine_entry serve ...`: vLLM's own `vllm` command, run in vLLM's environment the way
llm_local starts the engine, ending without the interpreter's finalization once vLLM has stopped.

vLLM's clean stop (SIGTERM: the HTTP server closed, the engine core and its workers ended) returns from its
CLI; the interpreter's finalization that would follow only tears down modules, and in it triton's nanobind
bindings report the objects still alive at that point (about 60 `nanobind: leaked ...` lines, references that
triton's own module state holds, not ours). So this runs the atexit handlers Python would have run (the
multiprocessing children's cleanup among them), flushes, and exits with vLLM's status.
"""

from __future__ import annotations

import atexit
import os
import sys


def exit_status(code: object) -> int:
    """A SystemExit code as a process exit status: None is 0, an int itself, anything else (a message) 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main() -> int:
    """Run vLLM's CLI with this process's arguments; its exit status."""
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    try:
        return exit_status(vllm_main())
    except SystemExit as exc:
        return exit_status(exc.code)


if __name__ == "__main__":
    status = main()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
