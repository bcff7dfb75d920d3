"""`make deploy`'s principal and `make kubectl-tunnel` as a user runs them: the real commands as subprocesses,
the real kubectl editing the kubeconfig, and a stand-in `aws` first on PATH that answers as the AWS CLI does
and records every call (the Session Manager session included)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdk.kubectl_access import PORT_FORWARDING_DOCUMENT

REPO = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
ACCOUNT = "123456789012"
CLUSTER_ARN = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/sd-on-eks"
ENDPOINT_HOST = "0123456789ABCDEF0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com"
INSTANCE = "i-0123456789abcdef0"
SSO_ROLE = f"arn:aws:iam::{ACCOUNT}:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_Admin_0123abcd"

FAKE_AWS = textwrap.dedent(
    """\
    #!{python}
    # The AWS CLI as far as these tools use it; answers come from FAKE_AWS_* variables.
    import json, os, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_AWS_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    def value(flag):
        return args[args.index(flag) + 1]
    command = " ".join(args[:2])
    if command == "sts get-caller-identity":
        print(json.dumps({{"Account": "{account}", "Arn": os.environ["FAKE_AWS_CALLER"]}}))
    elif command == "iam get-role":
        if os.environ.get("FAKE_AWS_IAM_DENIED"):
            sys.exit("\\nAn error occurred (AccessDenied) when calling the GetRole operation: not authorized")
        print(json.dumps(os.environ["FAKE_AWS_ROLE_ARN"]))
    elif command == "cloudformation describe-stacks":
        outputs = json.loads(os.environ["FAKE_AWS_OUTPUTS"])
        print(json.dumps({{"Stacks": [{{"StackName": value("--stack-name"), "Outputs": [
            {{"OutputKey": k, "OutputValue": v}} for k, v in outputs.items()]}}]}}))
    elif command == "eks describe-cluster":
        print(json.dumps({{"cluster": {{"name": value("--name"), "arn": "{cluster_arn}",
            "endpoint": "https://{host}"}}}}))
    elif command == "eks update-kubeconfig":
        # What the AWS CLI writes: the cluster entry named by ARN, its user running `aws eks get-token`.
        arn, alias = "{cluster_arn}", value("--alias")
        config = {{"apiVersion": "v1", "kind": "Config", "preferences": {{}}, "current-context": alias,
            "clusters": [{{"name": arn, "cluster": {{"server": "https://{host}",
                "certificate-authority-data": "Q0EK"}}}}],
            "contexts": [{{"name": alias, "context": {{"cluster": arn, "user": arn}}}}],
            "users": [{{"name": arn, "user": {{"exec": {{"apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "aws", "args": ["--region", value("--region"), "eks", "get-token",
                "--cluster-name", value("--name"), "--output", "json"]}}}}}}]}}
        with open(value("--kubeconfig"), "w") as f:
            json.dump(config, f)
        print("Added new context " + alias)
    elif command == "ssm start-session":
        print("Waiting for connections...")
    else:
        sys.exit("fake aws: unexpected call " + " ".join(args))
    """
).format(python=sys.executable, account=ACCOUNT, cluster_arn=CLUSTER_ARN, host=ENDPOINT_HOST)

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl (it edits the kubeconfig)")


@pytest.fixture
def fake_aws(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH starts with the stand-in `aws`; FAKE_AWS_LOG collects its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(FAKE_AWS)
    aws.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "AWS_REGION": REGION,
        "FAKE_AWS_LOG": str(tmp_path / "aws.log"),
        "FAKE_AWS_OUTPUTS": json.dumps({"ClusterName": "sd-on-eks", "KubectlTunnelInstanceId": INSTANCE}),
    }


def run(module: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


def calls(env: dict[str, str]) -> list[list[str]]:
    return [json.loads(line) for line in Path(env["FAKE_AWS_LOG"]).read_text().splitlines()]


def test_the_deployer_of_an_sso_session_is_its_role_with_the_path(fake_aws: dict[str, str]):
    env = {
        **fake_aws,
        "FAKE_AWS_CALLER": f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_Admin_0123abcd/jane@example.com",
        "FAKE_AWS_ROLE_ARN": SSO_ROLE,
    }
    result = run("tools.deployer", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == SSO_ROLE
    assert calls(env)[1][:4] == ["iam", "get-role", "--role-name", "AWSReservedSSO_Admin_0123abcd"]


def test_the_deployer_without_iam_read_access_is_the_role_without_a_path_and_says_so(fake_aws: dict[str, str]):
    env = {
        **fake_aws,
        "FAKE_AWS_CALLER": f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/ci-run-7",
        "FAKE_AWS_IAM_DENIED": "1",
    }
    result = run("tools.deployer", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"arn:aws:iam::{ACCOUNT}:role/Deployer"
    assert "AccessDenied" in result.stderr and "unless the role has a path" in result.stderr


def test_an_iam_user_deploys_as_itself_and_the_root_user_is_refused(fake_aws: dict[str, str]):
    user = f"arn:aws:iam::{ACCOUNT}:user/jane"
    assert run("tools.deployer", {**fake_aws, "FAKE_AWS_CALLER": user}).stdout.strip() == user
    root = run("tools.deployer", {**fake_aws, "FAKE_AWS_CALLER": f"arn:aws:iam::{ACCOUNT}:root"})
    assert root.returncode == 2
    assert root.stdout == ""
    assert root.stderr.startswith("make deploy: ") and "access entries" in root.stderr


def _cluster_entry(kubeconfig: Path) -> dict[str, Any]:
    # Read back through kubectl itself: the file is what kubectl will use.
    view = subprocess.run(
        ["kubectl", "config", "view", "--raw", "-o", "json", "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        check=True,
    )
    (cluster,) = json.loads(view.stdout)["clusters"]
    return cluster


def test_the_tunnel_writes_a_kubeconfig_for_the_local_port_and_starts_the_session(fake_aws: dict[str, str]):
    result = run("tools.kubectl_tunnel", fake_aws, "--local-port", "9443")
    assert result.returncode == 0, result.stderr
    kubeconfig = Path(fake_aws["HOME"]) / ".kube" / "sd-on-eks-tunnel"
    cluster = _cluster_entry(kubeconfig)
    assert cluster["name"] == CLUSTER_ARN
    # kubectl dials the local end of the session but checks the certificate against the endpoint's name.
    assert cluster["cluster"]["server"] == "https://127.0.0.1:9443"
    assert cluster["cluster"]["tls-server-name"] == ENDPOINT_HOST
    assert cluster["cluster"]["certificate-authority-data"] == "Q0EK"
    config = yaml.safe_load(kubeconfig.read_text())
    assert config["current-context"] == "sd-on-eks-tunnel"
    assert f"export KUBECONFIG={kubeconfig}" in result.stdout

    session = calls(fake_aws)[-1]
    assert session[:2] == ["ssm", "start-session"]
    options = dict(zip(session[2::2], session[3::2], strict=True))
    assert options["--target"] == INSTANCE
    assert options["--region"] == REGION
    assert options["--document-name"] == PORT_FORWARDING_DOCUMENT == "AWS-StartPortForwardingSessionToRemoteHost"
    assert json.loads(options["--parameters"]) == {
        "host": [ENDPOINT_HOST],
        "portNumber": ["443"],
        "localPortNumber": ["9443"],
    }


def test_a_stack_without_the_tunnel_stops_with_one_line_naming_the_setting(fake_aws: dict[str, str]):
    env = {**fake_aws, "FAKE_AWS_OUTPUTS": json.dumps({"ClusterName": "sd-on-eks"})}
    result = run("tools.kubectl_tunnel", env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "kubectlTunnel=false" in result.stderr
    assert not any(call[:2] == ["ssm", "start-session"] for call in calls(env))
