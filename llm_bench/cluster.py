"""`python -m llm_bench.cluster` (make bench-llm-cluster, the stack's `LlmBenchmarkCommand` output): the LLM
benchmark Job on every accelerator of a deployed stack, in one command, from the machine you deployed from.

    python -m llm_bench.cluster --stack SdOnEksServing --region us-west-2 [--namespace sd] [--accelerator neuron]
        [--results-file docs/benchmarks.md]

For each accelerator's benchmark CronJob (cdk/llm/benchmark_job.py) it
1. holds the LLM Deployment at one replica: KEDA's `autoscaling.keda.sh/paused-replicas: "1"` on its
   ScaledObject (kedacore/keda@v2.20.1 apis/keda/v1alpha1/scaledobject_types.go, PausedReplicasAnnotation),
   so the figures are one replica's, and waits until exactly one pod is ready;
2. with sign-in on, takes a client-credentials token of the stack's `ApiClientId` app client with your AWS
   credentials (as docs/serving.md does by hand) and writes it to the Secret the Job mounts, through kubectl's
   standard input (never its arguments); it renews it while the Jobs run;
3. creates a Job from the CronJob, waits for it, and prints its log; the benchmark's section goes to
   --results-file when given.
Whatever happens, it then lifts the hold (KEDA scales on its metrics again) and deletes the token's Secret.

It needs kubectl set up for the cluster (the `UpdateKubeconfigCommand` output) and AWS credentials that may read
the stack's outputs and describe its user pool client.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench.results_file import update_section
from llm_bench.job import CONTAINER, CRONJOB_SUFFIX, NAME_LABEL, TOKEN_FLAG, TOKEN_KEY, TOKEN_SECRET

BENCH_SELECTOR = ",".join(f"{key}={value}" for key, value in NAME_LABEL.items())
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
SECTION_START = "### LLM serving:"  # where llm_bench's section begins in its output
POLL_S = 15
TOKEN_RENEW_S = 40 * 60  # Cognito's access tokens here last an hour (cdk/serving/sign_in.py)


class Failure(Exception):
    """A step that cannot go on, with what to do about it."""


@dataclass(frozen=True)
class Kubectl:
    """kubectl in one namespace."""

    namespace: str
    binary: str = "kubectl"

    def run(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl; its output, or a Failure with its error."""
        command = [self.binary, "--namespace", self.namespace, *args]
        try:
            result = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False, timeout=120)
        except FileNotFoundError as exc:
            raise Failure(f"{self.binary} is not installed or not on PATH") from exc
        if result.returncode != 0:
            raise Failure(f"kubectl {' '.join(args[:3])} failed: {result.stderr.strip() or result.stdout.strip()}")
        return result.stdout

    def get(self, *args: str) -> dict[str, Any]:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self.run("get", *args, "--output", "json"))


@dataclass(frozen=True)
class Bench:
    """One accelerator's benchmark: its CronJob and the Deployment (and ScaledObject) it measures."""

    cronjob: str
    deployment: str
    signed_in: bool


def benches(kubectl: Kubectl, only: Sequence[str]) -> list[Bench]:
    """The benchmark CronJobs the stack applied (all, or those of the deployments `only` names)."""
    found = []
    for item in kubectl.get("cronjobs", "--selector", BENCH_SELECTOR)["items"]:
        name = item["metadata"]["name"]
        container = item["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        found.append(
            Bench(
                cronjob=name,
                deployment=name.removesuffix(CRONJOB_SUFFIX),
                signed_in=any(arg.split("=", 1)[0] == TOKEN_FLAG for arg in container.get("args", [])),
            )
        )
    chosen = [b for b in found if not only or any(b.deployment.endswith(f"-{a}") for a in only)]
    if not chosen:
        names = ", ".join(b.deployment for b in found) or "none"
        raise Failure(
            f"no LLM benchmark CronJob in namespace {kubectl.namespace} for {', '.join(only) or 'any accelerator'} "
            f"(found: {names}): deploy with llmEnabled=true, or pass the stack's --namespace"
        )
    return chosen


def stack_outputs(stack: str, region: str | None) -> dict[str, str]:
    """The stack's outputs by key."""
    import boto3

    described = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def client_credentials_token(outputs: dict[str, str], region: str | None) -> str:
    """An access token of the stack's programs' client (its secret read from Cognito, never stored)."""
    import boto3
    import httpx

    missing = [k for k in ("UserPoolId", "ApiClientId", "TokenUrl", "ApiScope") if k not in outputs]
    if missing:
        raise Failure(f"the stack has no output {', '.join(missing)}: is sign-in (authMode cognito) on?")
    client = boto3.client("cognito-idp", region_name=region).describe_user_pool_client(
        UserPoolId=outputs["UserPoolId"], ClientId=outputs["ApiClientId"]
    )["UserPoolClient"]
    response = httpx.post(
        outputs["TokenUrl"],
        auth=(outputs["ApiClientId"], client["ClientSecret"]),
        data={"grant_type": "client_credentials", "scope": outputs["ApiScope"]},
        timeout=30,
    )
    if response.status_code != 200:
        raise Failure(f"the token endpoint answered {response.status_code}: {response.text[:300]}")
    return str(response.json()["access_token"])


def put_token(kubectl: Kubectl, token: str) -> None:
    """Create or replace the token's Secret, the token on kubectl's standard input."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": TOKEN_SECRET, "labels": dict(NAME_LABEL)},
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }
    kubectl.run("apply", "--filename", "-", stdin=json.dumps(secret))


def hold_one_replica(kubectl: Kubectl, bench: Bench) -> None:
    """Pause the Deployment's autoscaling at one replica."""
    kubectl.run("annotate", "scaledobject", bench.deployment, f"{PAUSED_REPLICAS}=1", "--overwrite")


def release(kubectl: Kubectl, bench: Bench) -> str | None:
    """Lift the hold; what went wrong, if anything (cleanup goes on regardless)."""
    try:
        kubectl.run("annotate", "scaledobject", bench.deployment, f"{PAUSED_REPLICAS}-")
    except Failure as exc:
        return f"{exc}; lift it by hand: kubectl -n {kubectl.namespace} annotate scaledobject {bench.deployment} " + (
            f"{PAUSED_REPLICAS}-"
        )
    return None


def wait_one_ready(kubectl: Kubectl, bench: Bench, timeout_s: float, sleep: Callable[[float], None]) -> None:
    """Until the Deployment has exactly one pod, and it is ready."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = kubectl.get("deployment", bench.deployment).get("status", {})
        if status.get("replicas") == 1 and status.get("readyReplicas") == 1:
            return
        if time.monotonic() > deadline:
            raise Failure(
                f"{bench.deployment} did not settle at one ready replica in {timeout_s:.0f} s "
                f"(replicas {status.get('replicas')}, ready {status.get('readyReplicas', 0)}): "
                f"kubectl -n {kubectl.namespace} describe deployment {bench.deployment}"
            )
        sleep(POLL_S)


def job_outcome(job: dict[str, Any]) -> str | None:
    """ "Complete", "Failed" (with its reason), or None while it runs."""
    for condition in job.get("status", {}).get("conditions", []):
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            reason = f": {condition.get('reason')} {condition.get('message', '')}".rstrip()
            return "Complete" if condition["type"] == "Complete" else f"Failed{reason}"
    return None


def wait_jobs(
    kubectl: Kubectl,
    jobs: dict[str, Bench],
    timeout_s: float,
    renew: Callable[[], None] | None,
    sleep: Callable[[float], None],
) -> dict[str, str]:
    """Each Job's outcome, renewing the token every TOKEN_RENEW_S while any runs."""
    outcomes: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    renewed = time.monotonic()
    while len(outcomes) < len(jobs):
        for name in jobs:
            if name not in outcomes and (outcome := job_outcome(kubectl.get("job", name))) is not None:
                outcomes[name] = outcome
                print(f"{name}: {outcome}", file=sys.stderr)
        if len(outcomes) == len(jobs):
            break
        if time.monotonic() > deadline:
            raise Failure(f"the benchmark Jobs did not finish in {timeout_s:.0f} s: kubectl get jobs,pods")
        if renew is not None and time.monotonic() - renewed > TOKEN_RENEW_S:
            renew()
            renewed = time.monotonic()
        sleep(POLL_S)
    return outcomes


def section_of(log: str) -> str | None:
    """llm_bench's markdown section at the end of its log."""
    start = log.find(SECTION_START)
    return log[start:].strip() if start >= 0 else None


def collect(kubectl: Kubectl, job: str, outcome: str, bench: Bench, results_file: Path | None) -> list[str]:
    """Print the Job's log and keep its section; what went wrong, if anything."""
    try:
        log = kubectl.run("logs", f"job/{job}", "--container", CONTAINER)
    except Failure as exc:
        return [f"job/{job} {outcome}, and its log cannot be read: {exc}"]
    print(f"--- job/{job} ({outcome}) ---\n{log}")
    section = section_of(log)
    if outcome != "Complete" or section is None:
        return [f"job/{job} {outcome}" + ("" if section else ", no results in its log")]
    if results_file:
        update_section(results_file, f"llm cluster {bench.deployment}", section)
    return []


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m llm_bench.cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", default="SdOnEksServing", help="the serving stack's name (for its outputs)")
    parser.add_argument("--region", help="its region (default: your AWS configuration's)")
    parser.add_argument("--namespace", default="sd", help="the serving namespace (servingNamespace)")
    parser.add_argument(
        "--accelerator", action="append", default=[], choices=("neuron", "gpu"), help="only this one (repeatable)"
    )
    parser.add_argument("--results-file", type=Path, help="write each accelerator's section into this markdown file")
    parser.add_argument("--ready-timeout-s", type=float, default=1800, help="for one ready replica (a node may start)")
    parser.add_argument("--timeout-s", type=float, default=4 * 3600, help="for the Jobs (each has its own deadline)")
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl command")
    return parser.parse_args(argv)


def run(
    args: argparse.Namespace,
    token_source: Callable[[], str],
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Hold, sign in, run, collect; then always release. 0 when every Job completed."""
    kubectl = Kubectl(args.namespace, args.kubectl)
    try:
        chosen = benches(kubectl, args.accelerator)
    except Failure as exc:
        print(f"llm_bench.cluster: {exc}", file=sys.stderr)
        return 1
    signed_in = any(b.signed_in for b in chosen)
    held: list[Bench] = []
    problems: list[str] = []
    try:
        if signed_in:
            put_token(kubectl, token_source())
        for bench in chosen:
            hold_one_replica(kubectl, bench)
            held.append(bench)
        for bench in chosen:
            print(f"waiting for one ready {bench.deployment} replica", file=sys.stderr)
            wait_one_ready(kubectl, bench, args.ready_timeout_s, sleep)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        jobs = {f"{b.cronjob}-{stamp}": b for b in chosen}
        for name, bench in jobs.items():
            kubectl.run("create", "job", name, f"--from=cronjob/{bench.cronjob}")
            print(f"started job/{name}", file=sys.stderr)
        renew = (lambda: put_token(kubectl, token_source())) if signed_in else None
        outcomes = wait_jobs(kubectl, jobs, args.timeout_s, renew, sleep)
        for name, bench in jobs.items():
            problems += collect(kubectl, name, outcomes[name], bench, args.results_file)
    except Failure as exc:
        problems.append(str(exc))
    finally:
        for bench in held:
            if (problem := release(kubectl, bench)) is not None:
                problems.append(problem)
        if signed_in:
            try:
                kubectl.run("delete", "secret", TOKEN_SECRET, "--ignore-not-found")
            except Failure as exc:
                problems.append(f"{exc}; delete it by hand: kubectl -n {args.namespace} delete secret {TOKEN_SECRET}")
    for problem in problems:
        print(f"llm_bench.cluster: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse and run against the stack's Cognito client."""
    args = parse_args(argv)

    def token() -> str:
        import httpx
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return client_credentials_token(stack_outputs(args.stack, args.region), args.region)
        except (BotoCoreError, ClientError, httpx.HTTPError) as exc:
            raise Failure(f"cannot get a token for stack {args.stack}: {exc}") from exc

    return run(args, token)


if __name__ == "__main__":
    sys.exit(main())
