"""`python -m llm_bench.cluster`, the one command that runs the benchmark Job on each accelerator, against a stand-in
kubectl (tests/support/fake_kubectl.py) holding the CronJobs exactly as the stack builds them: it measures one
replica, keeps the token out of every command line, leaves nothing behind when a step fails, and writes each
accelerator's section where asked."""

from __future__ import annotations

import base64
import itertools
import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import jwt
import pytest
from moto.server import ThreadedMotoServer

from cdk.accelerators import NEURON, NVIDIA
from cdk.llm import benchmark_job
from llm_bench import cluster
from tests.cdk.test_llm_workload import GATEWAY_IMAGE, configs
from tests.support.fake_user_pool import FakeUserPool

pytestmark = pytest.mark.process  # runs a program of ours as a process per test (docs/testing.md)

FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_kubectl.py"
HELD = cluster.PAUSED_REPLICAS
REGION = "us-east-1"


def section(name: str) -> str:
    return f"shape run: ...\n### LLM serving: `m` on {name}\n\n| metric | value |\n|---|---|\n| completed | 16 |\n"


@pytest.fixture
def kube(tmp_path, monkeypatch) -> Path:
    """The stand-in cluster: both accelerators' benchmark CronJobs with sign-in on, two replicas each."""
    llm, cfg = configs()
    state: dict[str, Any] = {
        "namespace": cfg.namespace,
        "cronjobs": [
            benchmark_job.cronjob(acc, llm, cfg, image=GATEWAY_IMAGE, signed_in=True) for acc in (NEURON, NVIDIA)
        ],
        "annotations": {},
        "replicas": 2,
        "jobs": {},
        "polls": 2,
        "outcomes": {"llm-neuron-bench": "Complete", "llm-gpu-bench": "Complete"},
        "logs": {"llm-neuron-bench": section("neuron"), "llm-gpu-bench": section("nvidia")},
        "secrets": {},
        "calls": [],
    }
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(state))
    script = tmp_path / "kubectl"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_KUBE_STATE", str(path))
    return path


def change(kube: Path, **values: Any) -> None:
    kube.write_text(json.dumps(json.loads(kube.read_text()) | values))


def run(kube: Path, *extra: str, lifetime_s: float = 3600) -> tuple[int, dict[str, Any]]:
    issued = (cluster.Token(f"token-{n}", lifetime_s) for n in itertools.count(1))
    args = cluster.parse_args(["--stack", "S", "--namespace", "sd", "--kubectl", str(kube.parent / "kubectl"), *extra])
    code = cluster.run(args, lambda: next(issued), sleep=lambda _: None)
    return code, json.loads(kube.read_text())


def verbs(state: dict[str, Any]) -> list[str]:
    return [" ".join(call["argv"][2:4]) for call in state["calls"]]


def test_each_accelerator_is_measured_at_one_replica_and_its_section_kept(kube, tmp_path):
    results = tmp_path / "results.md"
    code, state = run(kube, "--results-file", str(results))
    assert code == 0
    text = results.read_text()
    assert "<!-- bench:llm cluster llm-neuron -->" in text and "on neuron" in text
    assert "<!-- bench:llm cluster llm-gpu -->" in text and "on nvidia" in text
    order = verbs(state)
    # Held at one before any Job starts; released after.
    first_job = order.index("create job")
    holds = [i for i, call in enumerate(state["calls"]) if call["argv"][-1] == f"{HELD}=1"]
    assert len(holds) == 2 and max(holds) < first_job
    assert state["annotations"] == {"llm-neuron": {}, "llm-gpu": {}}
    assert {job["cronjob"] for job in state["jobs"].values()} == {"llm-neuron-bench", "llm-gpu-bench"}


def test_the_token_goes_through_standard_input_only_and_is_gone_afterwards(kube):
    code, state = run(kube)
    assert code == 0
    assert not [c for c in state["calls"] if any("token-1" in word for word in c["argv"])]
    (applied,) = [c for c in state["calls"] if c["argv"][2] == "apply"]
    assert "--server-side" in applied["argv"]  # no copy of the token in a last-applied annotation
    assert json.loads(applied["stdin"])["data"] == {"token": base64.b64encode(b"token-1").decode()}
    assert state["secrets"] == {}  # deleted at the end


def test_a_failed_job_fails_the_command_and_still_releases_everything(kube, capsys):
    change(kube, outcomes={"llm-neuron-bench": "Failed", "llm-gpu-bench": "Complete"})
    code, state = run(kube)
    assert code == 1
    assert "llm-neuron-bench" in capsys.readouterr().err
    assert state["annotations"] == {"llm-neuron": {}, "llm-gpu": {}} and state["secrets"] == {}


def test_a_deployment_that_does_not_settle_at_one_stops_before_any_job(kube, capsys):
    change(kube, stuck=True)
    code, state = run(kube, "--ready-timeout-s", "0")
    assert code == 1
    err = capsys.readouterr().err
    assert "did not settle at one ready replica" in err
    assert "kubectl -n sd describe scaledobject,deployment" in err
    assert "create job" not in verbs(state)
    assert state["annotations"] == {"llm-neuron": {}, "llm-gpu": {}} and state["secrets"] == {}


def test_one_accelerator_can_be_chosen(kube):
    code, state = run(kube, "--accelerator", "gpu")
    assert code == 0
    assert {job["cronjob"] for job in state["jobs"].values()} == {"llm-gpu-bench"}
    assert "llm-neuron" not in state["annotations"]


def test_a_long_run_renews_the_token(kube):
    change(kube, polls=4)
    code, state = run(kube, lifetime_s=0)  # a token that is due for renewal at once
    assert code == 0
    applied = [c for c in state["calls"] if c["argv"][2] == "apply"]
    tokens = [base64.b64decode(json.loads(c["stdin"])["data"]["token"]).decode() for c in applied]
    assert tokens[:2] == ["token-1", "token-2"]


def test_a_few_failed_looks_at_the_jobs_are_waited_out(kube):
    change(kube, flaky_gets=3)
    code, state = run(kube)
    assert code == 0 and state["annotations"] == {"llm-neuron": {}, "llm-gpu": {}}


def test_an_abandoned_run_stops_its_jobs_before_lifting_the_hold(kube, capsys):
    change(kube, polls=100)  # the Jobs do not finish within the command's own timeout
    code, state = run(kube, "--timeout-s", "0")
    assert code == 1 and "did not finish" in capsys.readouterr().err
    assert len(state["deleted_jobs"]) == 2 and state["jobs"] == {}
    order = verbs(state)
    last_delete = max(i for i, verb in enumerate(order) if verb == "delete job")
    first_release = order.index("annotate scaledobject", order.index("create job"))
    assert last_delete < first_release
    assert state["annotations"] == {"llm-neuron": {}, "llm-gpu": {}} and state["secrets"] == {}


def test_a_pause_someone_else_set_is_left_alone(kube, capsys):
    change(kube, annotations={"llm-gpu": {HELD: "0"}})
    code, state = run(kube)
    assert code == 1
    assert "scaledobject/llm-gpu is already paused (autoscaling.keda.sh/paused-replicas=0)" in capsys.readouterr().err
    assert state["annotations"]["llm-gpu"] == {HELD: "0"}  # neither overwritten nor lifted
    assert state["annotations"].get("llm-neuron") == {} and state["jobs"] == {}


def test_without_a_benchmark_in_the_namespace_it_says_how_to_get_one(kube, capsys):
    change(kube, cronjobs=[])
    code, state = run(kube)
    assert code == 1
    assert "deploy with llmEnabled=true" in capsys.readouterr().err
    assert state["annotations"] == {}


def test_without_kubectl_it_says_so(tmp_path, capsys):
    args = cluster.parse_args(["--stack", "S", "--namespace", "sd", "--kubectl", str(tmp_path / "no-such-kubectl")])
    assert cluster.run(args, lambda: cluster.Token("unused", 3600), sleep=lambda _: None) == 1
    assert "is not installed or not on PATH" in capsys.readouterr().err


@pytest.fixture
def aws(monkeypatch) -> Iterator[str]:
    """A moto server as the AWS the command's boto3 clients reach (AWS_ENDPOINT_URL), with test credentials."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    yield REGION
    server.stop()


def test_the_token_is_the_programs_clients_from_the_stacks_outputs(aws):
    # The outputs the serving stack writes, the client's secret in Cognito (moto), the token endpoint a stand-in
    # speaking the client-credentials grant (HTTP Basic, the scope): the same calls docs/serving.md makes by hand.
    cognito = boto3.client("cognito-idp", region_name=aws)
    pool_id = cognito.create_user_pool(PoolName="users")["UserPool"]["Id"]
    client = cognito.create_user_pool_client(UserPoolId=pool_id, ClientName="Programs", GenerateSecret=True)
    client_id, secret = client["UserPoolClient"]["ClientId"], client["UserPoolClient"]["ClientSecret"]
    pool = FakeUserPool(api_client_id=client_id, api_client_secret=secret)
    with pool.serving():
        outputs = {
            "UserPoolId": pool_id,
            "ApiClientId": client_id,
            "TokenUrl": f"{pool.url}/oauth2/token",
            "ApiScope": "sd-api/generate",
        }
        token = cluster.client_credentials_token(outputs, aws)
        claims = jwt.decode(token.value, options={"verify_signature": False})
        assert token.lifetime_s == 3600  # the endpoint's expires_in: renewals follow it
        assert claims["client_id"] == client_id and claims["token_use"] == "access"
        # The endpoint refuses a client whose secret does not match: the command says what it answered.
        pool.api_client_secret = "rotated"
        with pytest.raises(cluster.Failure, match=r"the token endpoint answered 400: .*invalid_client"):
            cluster.client_credentials_token(outputs, aws)
    # A stack without sign-in has none of those outputs: the command says so.
    with pytest.raises(cluster.Failure, match="the stack has no output UserPoolId, ApiClientId, TokenUrl"):
        cluster.client_credentials_token({"ApiScope": "sd-api/generate"}, aws)


def test_without_the_stack_it_says_where_to_find_it(capsys):
    with pytest.raises(SystemExit) as exited:
        cluster.parse_args([])
    assert exited.value.code == 2 and "LlmBenchmarkCommand output" in capsys.readouterr().err
