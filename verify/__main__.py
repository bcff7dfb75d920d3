"""`python -m verify` (`make verify`): after a deploy, run the first-deploy checks against the stack and print
one row per check; exit 1 on any FAIL, 2 when the run cannot start (no credentials, no stack, no cluster)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from verify.context import Context
from verify.kube import Kubectl, KubeError
from verify.result import Status
from verify.runner import run_checks, select, summary
from verify.stacks import CLUSTER, SERVING, Stop, stack_outputs

CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"
BOTO_CONFIG = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"})


def default_namespace() -> str | None:
    """The serving namespace of this checkout's cdk.json (servingNamespace), as the deploy read it."""
    try:
        value = json.loads(CDK_JSON.read_text())["context"].get("servingNamespace")
    except (OSError, ValueError, KeyError):
        return None
    return str(value) if value else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__)
    parser.add_argument("--region", help="the stack's region (default: AWS_REGION or the profile's)")
    parser.add_argument("--namespace", default=default_namespace(), help="servingNamespace (default: cdk.json's)")
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl command")
    parser.add_argument("checks", nargs="*", help="run only these checks (names as docs/first-deploy.md gives them)")
    return parser.parse_args(argv)


def start(args: argparse.Namespace, session_for: Callable[..., Any] = boto3.session.Session) -> Context:
    """Credentials, stacks and cluster, each found or a Stop with the one line that says what to do."""
    # AWS_REGION is the CLI's (and docs/first-deploy.md's); boto3 itself reads only AWS_DEFAULT_REGION and profiles.
    session = session_for(region_name=args.region or os.environ.get("AWS_REGION") or None)
    region = session.region_name
    if not region:
        raise Stop("make verify: no AWS region (set AWS_REGION to the region you deployed to)")

    def clients(service: str) -> Any:
        return session.client(service, region_name=region, config=BOTO_CONFIG)

    try:
        clients("sts").get_caller_identity()
    except (BotoCoreError, ClientError) as exc:
        raise Stop(
            f"make verify: no AWS credentials found (aws sts get-caller-identity failed: {exc}); "
            "run it where you deploy from"
        ) from None
    try:
        outputs = stack_outputs(clients("cloudformation"), region)
    except BotoCoreError as exc:
        raise Stop(f"make verify: cannot read the stacks in {region}: {exc}") from None
    if not args.namespace:
        raise Stop("make verify: no serving namespace (give --namespace, servingNamespace of your deploy)")
    if shutil.which(args.kubectl) is None:
        raise Stop(f"make verify: {args.kubectl} not found (install kubectl, or give --kubectl)")
    kube = Kubectl(args.namespace, args.kubectl)
    try:
        kube.get("namespace", args.namespace)
    except KubeError as exc:
        if "NotFound" in str(exc):
            raise Stop(
                f"make verify: the cluster has no namespace {args.namespace} (give --namespace, the "
                "servingNamespace you deployed with)"
            ) from None
        command = outputs.get(CLUSTER, {}).get("UpdateKubeconfig", "aws eks update-kubeconfig --name <the cluster>")
        raise Stop(f"make verify: kubectl cannot reach the cluster ({exc}); run `{command}`") from None
    return Context(
        region=region,
        outputs=outputs,
        kube=kube,
        clients=clients,
        token=functools.cache(lambda: program_token(outputs, region)),
        which=shutil.which,
    )


def program_token(outputs: dict[str, dict[str, str]], region: str) -> str:
    """An access token of the stack's programs' client (its secret read from Cognito, never stored)."""
    from llm_bench.cluster import client_credentials_token

    return client_credentials_token(outputs[SERVING], region).value


def main(argv: Sequence[str] | None = None, session_for: Callable[..., Any] = boto3.session.Session) -> int:
    """Run the checks; 0 when none fails, 1 when one does, 2 when the run cannot start."""
    args = parse_args(argv)
    try:
        checks = select(args.checks)
        ctx = start(args, session_for)
    except (Stop, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    results = run_checks(ctx, checks, sys.stdout)
    print(summary(results))
    return 1 if any(r.status == Status.FAIL for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
