"""`python -m tools.kubectl_tunnel` (`make kubectl-tunnel`): kubectl for the cluster's private API endpoint.

It reads the cluster stack's outputs, writes a kubeconfig whose server is a local port and whose
`tls-server-name` is the endpoint's hostname (the API server's certificate names that host, not 127.0.0.1),
then holds a Session Manager port-forwarding session open through the stack's tunnel instance
(cdk/constructs/kubectl_tunnel.py). While it runs, `KUBECONFIG=<that file> kubectl ...` reaches the cluster.
Needs the AWS CLI with the Session Manager plugin, kubectl, and the credentials you deployed with.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from cdk.kubectl_access import DEFAULT_LOCAL_PORT, TUNNEL_INSTANCE_OUTPUT, session_command
from tools.aws_cli import CommandError, aws_json, run

CLUSTER_STACK = "SdOnEksCluster"  # cdk/build.py's STACK_PREFIX + "Cluster"


@dataclass(frozen=True)
class Tunnel:
    """What the cluster stack says about its tunnel, and the cluster's entry in a kubeconfig."""

    cluster_name: str
    cluster_arn: str
    endpoint_host: str
    instance_id: str


def find_tunnel(stack: str, region: str) -> Tunnel:
    """The cluster and tunnel instance of a deployed cluster stack; a CommandError naming what is missing."""
    stacks = aws_json("cloudformation", "describe-stacks", "--stack-name", stack, "--region", region)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks["Stacks"][0].get("Outputs", [])}
    if TUNNEL_INSTANCE_OUTPUT not in outputs:
        raise CommandError(
            f"stack {stack} has no kubectl tunnel (kubectlTunnel=false): deploy with kubectlTunnel=true, or use a "
            "public endpoint (docs/platform.md, kubectl)"
        )
    name = outputs["ClusterName"]
    cluster = aws_json("eks", "describe-cluster", "--name", name, "--region", region)["cluster"]
    # netloc, not hostname (which lowercases): the name exactly as EKS gives it.
    host = urlparse(cluster["endpoint"]).netloc.split(":")[0]
    if not host:
        raise CommandError(f"cluster {name} has no endpoint yet: {cluster['endpoint']!r}")
    return Tunnel(name, cluster["arn"], host, outputs[TUNNEL_INSTANCE_OUTPUT])


def write_kubeconfig(tunnel: Tunnel, region: str, kubeconfig: Path, local_port: int) -> None:
    """A kubeconfig for the tunnel: the cluster's usual entry (aws eks update-kubeconfig, with its `aws eks
    get-token` user), its server moved to 127.0.0.1:`local_port` with the endpoint's name kept for TLS."""
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    target = ["--kubeconfig", str(kubeconfig)]
    alias = f"{tunnel.cluster_name}-tunnel"
    run(
        [
            "aws",
            "eks",
            "update-kubeconfig",
            "--name",
            tunnel.cluster_name,
            "--region",
            region,
            *target,
            "--alias",
            alias,
        ]
    )
    server = [f"--server=https://127.0.0.1:{local_port}", f"--tls-server-name={tunnel.endpoint_host}"]
    run(["kubectl", "config", "set-cluster", tunnel.cluster_arn, *target, *server])


def default_region() -> str | None:
    """AWS_REGION, AWS_DEFAULT_REGION, else the CLI profile's region."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        return region
    try:
        return run(["aws", "configure", "get", "region"]).strip() or None
    except CommandError:
        return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m tools.kubectl_tunnel", description=__doc__)
    parser.add_argument("--region", help="the stack's region (default: AWS_REGION or the profile's)")
    parser.add_argument("--stack", default=CLUSTER_STACK, help=f"the cluster stack (default {CLUSTER_STACK})")
    parser.add_argument("--local-port", type=int, default=DEFAULT_LOCAL_PORT, help="the local port to forward")
    parser.add_argument(
        "--kubeconfig", type=Path, help="the kubeconfig to write (default ~/.kube/<clusterName>-tunnel)"
    )
    parser.add_argument(
        "--no-session", action="store_true", help="write the kubeconfig and print the session command only"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the kubeconfig and hold the session; exit 2 with one line when it cannot start."""
    args = parse_args(argv)
    try:
        region = args.region or default_region()
        if not region:
            raise CommandError("no AWS region: set AWS_REGION to the region you deployed to")
        tunnel = find_tunnel(args.stack, region)
        kubeconfig = args.kubeconfig or Path.home() / ".kube" / f"{tunnel.cluster_name}-tunnel"
        write_kubeconfig(tunnel, region, kubeconfig, args.local_port)
    except CommandError as exc:
        print(f"make kubectl-tunnel: {exc}", file=sys.stderr)
        return 2
    command = session_command(
        instance_id=tunnel.instance_id, endpoint_host=tunnel.endpoint_host, local_port=args.local_port, region=region
    )
    print(f"wrote {kubeconfig}; while the session below runs, in another terminal:")
    print(f"  export KUBECONFIG={kubeconfig}")
    print("  kubectl get nodes")
    print("session: " + subprocess.list2cmdline(command))
    if args.no_session:
        return 0
    try:
        # The plugin prints "Waiting for connections..." once the local port listens; Ctrl+C ends it.
        return subprocess.run(command, check=False).returncode
    except FileNotFoundError:
        print("make kubectl-tunnel: aws not found: install the AWS CLI and its Session Manager plugin", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
