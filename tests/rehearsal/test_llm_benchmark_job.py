"""The LLM benchmark Job as the shipped synth applies it (cdk/llm/benchmark_job.py), run the way its pod runs it:
the gateway image's files and a Python made of exactly its lock, the manifest's command, arguments and
variables, a read-only root, its /tmp a tmpfs of its size, the pod's user, the token where its Secret volume
puts it, against the real local LLM stack (vLLM's CPU engine) behind a gateway that requires sign-in.

Changed from the manifest, and only these: the Service URL points at that gateway (the sandbox shares the
host's network for it), and arguments appended at the end (argparse keeps the last) name the tiny model the
local engine serves and shrink the load to what two shared cores finish in seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdk.accelerators import NEURON, NVIDIA, Accelerator
from cdk.llm import benchmark_job
from llm_bench.job import CONTAINER, TOKEN_KEY, TOKEN_SECRET
from llm_local.engine import SERVED_MODEL_NAME
from tests.llm.stack import run_gateway
from tests.rehearsal.conftest import Stacks
from tests.rehearsal.pods import Container
from tests.rehearsal.sandbox import Outcome, bwrap_unusable
from tests.rehearsal.test_llm_pods import Store, rehearse
from tests.support.fake_user_pool import API_CLIENT, FakeUserPool

# The tiny model's context is 4,096 tokens and it runs on two shared cores: a few short requests per part.
SMALL = ("--input-tokens=64", "--output-tokens=8", "--requests=4", "--sweep-prompts=2", "--rounds=1")


@pytest.fixture(scope="module", autouse=True)
def sandbox_usable() -> None:
    unusable = bwrap_unusable()
    if unusable:
        pytest.skip(f"the pod rehearsal needs bubblewrap: {unusable}")


def bench_container(stacks: Stacks, acc: Accelerator) -> Container:
    return stacks.containers[f"CronJob/{benchmark_job.cronjob_name(acc)}:{CONTAINER}"]


def pointed_at(container: Container, url: str, *extra: str) -> Container:
    """The container with its Service URL replaced by `url` and `extra` arguments appended."""
    args = [f"--gateway-url={url}" if a.startswith("--gateway-url=") else a for a in container.args or ()]
    return Container(**{**container.__dict__, "args": (*args, *extra)})


def run_bench(
    stacks: Stacks, container: Container, gateway_url: str, token: str, image_python: Path, tmp_path: Path
) -> Outcome:
    """The container in its sandbox on the host's network, its Secret volume holding `token`."""
    binds = []
    for secret, mount_path in container.secrets:
        assert secret == TOKEN_SECRET
        folder = tmp_path / "secret"
        folder.mkdir()
        (folder / TOKEN_KEY).write_text(token, encoding="utf-8")
        binds.append((str(folder), mount_path))
    small = pointed_at(container, gateway_url, f"--model={SERVED_MODEL_NAME}", *SMALL)
    store = Store(region=stacks.values.region, bucket="unused", weights_prefix="", artifacts_prefix=None)
    plan = {"mode": "exit", "aws": False}
    return rehearse(store, small, image_python, tmp_path, plan, 600, binds=tuple(binds), network=True)


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_job_calls_its_accelerators_service_signed_in(stacks, acc):
    container = bench_container(stacks, acc)
    args = container.args or ()
    assert container.command == ("python", "-m", "llm_bench") and container.read_only_root
    assert f"--gateway-url={benchmark_job.service_url(acc, stacks.config.serving)}" in args
    # Sign-in is on in the shipped synth: the token comes from the Secret the command writes, as a file.
    (token_arg,) = [a for a in args if a.startswith("--token-file=")]
    [(secret, mount_path)] = container.secrets
    assert secret == TOKEN_SECRET and token_arg == f"--token-file={mount_path}/{TOKEN_KEY}"
    assert not [value for value in container.env.values() if "token" in value.lower()]


def test_the_job_measures_one_replica_through_a_signed_in_gateway(stacks, engine_url, image_python, tmp_path):
    pool = FakeUserPool()
    with (
        pool.serving(),
        run_gateway(
            engine_url, tmp_path, {"AUTH": "cognito", "AUTH_ISSUER": pool.issuer, "AUTH_CLIENT_IDS": API_CLIENT}
        ) as gateway,
    ):
        container = bench_container(stacks, NEURON)
        outcome = run_bench(stacks, container, gateway.url, pool.token(), image_python, tmp_path)
        records = gateway.records()
    assert outcome.report.get("returncode") == 0, outcome
    log = outcome.log
    assert "### LLM serving:" in log and "| completed | 4 |" in log, log[-3000:]
    assert "(skipped: no --engine-url" in log  # vLLM is on its pod's socket: no direct comparison
    assert "requests/min within it (`llmRequestsPerMinuteNeuron`)" in log, log[-2000:]
    assert records and all(r.get("status") == 200 for r in records), records[-3:]
