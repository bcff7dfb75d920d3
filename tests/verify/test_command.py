"""`python -m verify` as a user runs it: one line and exit 2 when it cannot start (no credentials, a stack
missing, kubectl without a cluster), else one row per check and exit 1 on any FAIL. AWS through moto and
botocore-stubbed CloudFormation (moto's needs packages this environment lacks), the cluster through the
stand-in kubectl."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.verify.conftest import NAMESPACE, OUTPUTS, REGION, deployment, pod, stubbed
from verify import __main__ as command
from verify.result import Check, Status, failed
from verify.runner import ALL_CHECKS, run_check
from verify.stacks import ALL, CLUSTER, IMAGES, NETWORK, SERVING

pytestmark = pytest.mark.process  # runs a program of ours as a process per test (docs/testing.md)

REPO = Path(__file__).resolve().parents[2]


class Session:
    """A boto3 Session whose clients are the given stubs, else boto3's (moto under the `aws` fixture)."""

    def __init__(self, clients: dict[str, Any]) -> None:
        self.clients = clients
        self.region_name = REGION

    def __call__(self, region_name: str | None = None) -> Session:
        return self

    def client(self, service: str, region_name: str | None = None, config: Any = None) -> Any:
        return self.clients.get(service) or boto3.client(service, region_name=region_name)


def described(name: str, outputs: dict[str, str]) -> dict[str, Any]:
    stack = {"StackName": name, "CreationTime": "2026-01-01T00:00:00Z", "StackStatus": "CREATE_COMPLETE"}
    stack["Outputs"] = [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()]
    return {"Stacks": [stack]}


def cloudformation(
    outputs: dict[str, dict[str, str]], *, missing: str | None = None, listings: tuple[str, ...] = ()
) -> Any:
    """CloudFormation answering describe_stacks for each stack in turn (`missing` as CloudFormation does)."""
    cfn, stub = stubbed("cloudformation")
    for name in ALL:
        if name == missing or name not in outputs:
            stub.add_client_error(
                "describe_stacks",
                "ValidationError",
                f"Stack with id {name} does not exist",
                expected_params={"StackName": name},
            )
            if name == missing:
                break
        else:
            stub.add_response("describe_stacks", described(name, outputs[name]), {"StackName": name})
    for stack in listings:  # the stacks whose resources the checks list, in the checks' order
        stub.add_response("list_stack_resources", {"StackResourceSummaries": []}, {"StackName": stack})
    return cfn


def kubectl_args(cluster) -> list[str]:
    return ["--kubectl", str(cluster.path.parent / "kubectl"), "--namespace", NAMESPACE]


def test_without_credentials_it_stops_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "HOME": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-m", "verify"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("make verify: no AWS credentials found (aws sts get-caller-identity failed: ")
    assert lines[0].endswith("run it where you deploy from")


def test_rejected_credentials_stop_with_one_line(cluster, capsys):
    sts, stub = stubbed("sts")
    stub.add_client_error(
        "get_caller_identity", "ExpiredToken", "The security token included in the request is expired"
    )

    assert command.main(kubectl_args(cluster), Session({"sts": sts})) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ExpiredToken" in err and err.startswith("make verify: no AWS credentials found")


def test_a_missing_stack_is_named_with_its_region(aws, cluster, capsys):
    outputs = {k: v for k, v in OUTPUTS.items()}
    cfn = cloudformation(outputs, missing=IMAGES)

    assert command.main(kubectl_args(cluster), Session({"cloudformation": cfn})) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"make verify: stack {IMAGES} not found in {REGION} (Stack with id {IMAGES} does not exist)")
    assert "\n" not in err


def test_the_network_stack_may_be_absent(aws, cluster, capsys):
    cfn = cloudformation(OUTPUTS)  # no NETWORK in OUTPUTS: an existing VPC
    cluster.add("networkpolicies", {"metadata": {"name": "x"}})

    assert command.main([*kubectl_args(cluster), "network-policies"], Session({"cloudformation": cfn})) == 1
    assert NETWORK not in OUTPUTS
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("network-policies  FAIL  missing default-deny-ingress")


def test_kubectl_without_a_cluster_names_the_update_kubeconfig_command(aws, cluster, capsys):
    cluster.state["unreachable"] = True
    cluster.save()

    assert command.main(kubectl_args(cluster), Session({"cloudformation": cloudformation(OUTPUTS)})) == 2
    err = capsys.readouterr().err.strip()
    assert "kubectl cannot reach the cluster (error: Unable to connect to the server" in err
    assert err.endswith(f"run `{OUTPUTS[CLUSTER]['UpdateKubeconfig']}`")


def test_a_namespace_the_cluster_lacks_is_named(aws, cluster, capsys):
    argv = ["--kubectl", str(cluster.path.parent / "kubectl"), "--namespace", "other"]

    assert command.main(argv, Session({"cloudformation": cloudformation(OUTPUTS)})) == 2
    assert capsys.readouterr().err.startswith("make verify: the cluster has no namespace other (give --namespace")


def test_a_missing_kubectl_is_named(aws, capsys, tmp_path):
    argv = ["--kubectl", str(tmp_path / "kubectl"), "--namespace", NAMESPACE]

    assert command.main(argv, Session({"cloudformation": cloudformation(OUTPUTS)})) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"make verify: {tmp_path / 'kubectl'} not found (install kubectl, or give --kubectl)"
    )


def test_one_row_per_check_and_exit_1_on_a_failure(aws, cluster, capsys, monkeypatch, tmp_path):
    # Node for the one check that imports aws-cdk-lib, and no helm or docker: those checks skip.
    monkeypatch.setenv("PATH", str(REPO / "node_modules" / ".bin"))
    outputs = {k: dict(v) for k, v in OUTPUTS.items()}
    outputs[SERVING]["ServiceUrl"] = "http://127.0.0.1:9/"  # loopback, nothing listens: never the internet
    cfn = cloudformation(outputs, listings=(CLUSTER, SERVING, SERVING))

    assert command.main(kubectl_args(cluster), Session({"cloudformation": cfn})) == 1
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows[:-1]] == [c.name for c in ALL_CHECKS]
    assert all(r.split()[1] in {s.value for s in Status} for r in rows[:-1])
    assert re.fullmatch(r"\d+ PASS, \d+ FAIL, \d+ SKIP", rows[-1])


def test_a_passing_selection_exits_0(aws, cluster, capsys):
    cluster.add("pods", pod("sd-gpu-1"))
    cluster.add("deployments", deployment("sd-gpu"))

    argv = [*kubectl_args(cluster), "pods-ready-read-only", "pod-identity-token"]
    assert command.main(argv, Session({"cloudformation": cloudformation(OUTPUTS)})) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 PASS, 0 FAIL, 0 SKIP"


def test_an_unknown_check_name_stops_with_the_known_ones(capsys):
    assert command.main(["no-such-check"]) == 2
    assert "make verify: no check named no-such-check; the checks: pin-nvidia-base-image" in capsys.readouterr().err


def test_a_check_that_breaks_is_its_own_fail_and_the_run_goes_on(make_context):
    def broken(ctx: Any) -> Any:
        raise ConnectionResetError("peer closed")

    row = run_check(make_context(), Check("broken", broken))
    assert (row.status, row.evidence) == (Status.FAIL, "ConnectionResetError: peer closed")
    assert run_check(make_context(), Check("ok", lambda ctx: failed("x"))).status == Status.FAIL


def test_the_stack_names_are_the_apps():
    build = (REPO / "cdk" / "build.py").read_text()
    prefix = re.search(r'^STACK_PREFIX = "(\w+)"', build, re.MULTILINE)
    assert prefix is not None
    built = {prefix.group(1) + name for name in re.findall(r'f"\{STACK_PREFIX\}(\w+)"', build)}
    assert built == set(ALL)


@pytest.mark.parametrize("name", [c.name for c in ALL_CHECKS])
def test_check_names_are_unique_kebab_case(name):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name)
    assert [c.name for c in ALL_CHECKS].count(name) == 1
