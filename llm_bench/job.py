"""The benchmark Job's names, shared by the stack that applies it (cdk/llm/benchmark_job.py) and the command that
runs it (llm_bench/cluster.py)."""

from __future__ import annotations

from typing import Final

NAME_LABEL: Final = {"app.kubernetes.io/name": "llm-bench"}  # its pods, CronJobs and token Secret
CONTAINER: Final = "bench"
CRONJOB_SUFFIX: Final = "-bench"  # the CronJob of the LLM Deployment `<name>` is `<name>-bench`
# Names only: the token is written and deleted by llm_bench/cluster.py, never by the stack.
TOKEN_FLAG: Final = "--token-file"  # noqa: S105  # the argument naming the token's file (python -m llm_bench)
TOKEN_SECRET: Final = "llm-bench-token"  # noqa: S105
TOKEN_KEY: Final = "token"  # noqa: S105
