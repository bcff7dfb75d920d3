"""`python -m llm_bench.cluster` (make bench-llm-cluster, the stack's `LlmBenchmarkCommand` output): the LLM
benchmark Job on every accelerator of a deployed stack, in one command, from the machine you deployed from.

    python -m llm_bench.cluster --stack SdOnEksServing --region us-west-2 [--namespace sd] [--accelerator neuron]
        [--results-file docs/benchmarks.md]

For each accelerator's benchmark CronJob (cdk/llm/benchmark_job.py) it
1. with sign-in on, takes a client-credentials token of the stack's `ApiClientId` app client with your AWS
   credentials (as docs/serving.md does by hand) and writes it to the Secret the Job mounts, through kubectl's
   standard input (never its arguments), by server-side apply (no copy in an annotation); it renews it every
   once two thirds of its life (the token endpoint's `expires_in`) have passed, until the end;
2. holds the LLM Deployment at one replica: KEDA's `autoscaling.keda.sh/paused-replicas: "1"` on its
   ScaledObject (kedacore/keda@v2.20.1 apis/keda/v1alpha1/scaledobject_types.go, PausedReplicasAnnotation:
   KEDA removes the HPA and sets the replicas itself), never over a pause already there, so the figures are one
   replica's, and waits until KEDA has taken it and exactly one pod is ready;
3. creates a Job from the CronJob, waits for it, and prints its log; the benchmark's section goes to
   --results-file when given.
Whatever happens, it then deletes the Jobs that did not finish, lifts the hold (KEDA scales on its metrics
again) and deletes the token's Secret, and names what it could not undo with the command that does.

It needs kubectl set up for the cluster (the `UpdateKubeconfig` output) and AWS credentials that may read
the stack's outputs and describe its user pool client.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.bench.results_file import update_section
from llm_bench.job import CONTAINER, CRONJOB_SUFFIX, NAME_LABEL, TOKEN_FLAG, TOKEN_KEY, TOKEN_SECRET

BENCH_SELECTOR = ",".join(f"{key}={value}" for key, value in NAME_LABEL.items())
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
FIELD_MANAGER = "llm-bench"
SECTION_START = "### LLM serving:"  # where llm_bench's section begins in its output
POLL_S = 15
RENEW_AFTER = 2 / 3  # of a token's life: renewed with a third of it left
KUBECTL_TIMEOUT_S = 120
POLL_FAILURES_TOLERATED = 4  # consecutive failed looks at a Job (a network blip, a credential refresh)


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
            result = subprocess.run(
                command, input=stdin, capture_output=True, text=True, check=False, timeout=KUBECTL_TIMEOUT_S
            )
        except FileNotFoundError as exc:
            raise Failure(f"{self.binary} is not installed or not on PATH") from exc
        except (subprocess.TimeoutExpired, OSError) as exc:
            raise Failure(f"kubectl {' '.join(args[:3])} did not finish: {exc}") from exc
        if result.returncode != 0:  # kubectl's last line says what went wrong; client-go's log lines precede it
            said = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise Failure(f"kubectl {' '.join(args[:3])} failed: {said[-1] if said else f'exit {result.returncode}'}")
        return result.stdout

    def get(self, *args: str) -> dict[str, Any]:
        """`kubectl get ... -o json`, parsed."""
        out = self.run("get", *args, "--output", "json")
        try:
            return dict(json.loads(out))
        except ValueError as exc:
            raise Failure(f"kubectl get {' '.join(args[:2])} did not answer JSON: {out[:200]!r}") from exc


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


@dataclass(frozen=True)
class Token:
    """An access token and how long it lasts (seconds), as the token endpoint said."""

    value: str
    lifetime_s: float


def client_credentials_token(outputs: dict[str, str], region: str | None) -> Token:
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
    answer = response.json()
    return Token(str(answer["access_token"]), float(answer["expires_in"]))


@dataclass
class TokenSecret:
    """The Secret the Jobs read their token from: written through kubectl's standard input and renewed before the
    token runs out (`clean_up` deletes it)."""

    kubectl: Kubectl
    source: Callable[[], Token]
    renew_at: float | None = None

    def put(self) -> None:
        """Create or replace it. Server-side apply: a client-side apply would keep a copy of the token in the
        object's last-applied-configuration annotation."""
        token = self.source()
        data = base64.b64encode(token.value.encode()).decode()
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": TOKEN_SECRET, "labels": dict(NAME_LABEL)},
            "type": "Opaque",
            "data": {TOKEN_KEY: data},
        }
        self.kubectl.run(
            "apply", "--server-side", "--field-manager", FIELD_MANAGER, "--filename", "-", stdin=json.dumps(secret)
        )
        self.renew_at = time.monotonic() + token.lifetime_s * RENEW_AFTER

    def renew_if_due(self) -> None:
        """A fresh token once two thirds of the last one's life have passed."""
        if self.renew_at is not None and time.monotonic() >= self.renew_at:
            self.put()


def hold_one_replica(kubectl: Kubectl, bench: Bench) -> None:
    """Pause the Deployment's autoscaling at one replica; never over a pause someone else set."""
    annotations = kubectl.get("scaledobject", bench.deployment).get("metadata", {}).get("annotations") or {}
    if PAUSED_REPLICAS in annotations:
        raise Failure(
            f"scaledobject/{bench.deployment} is already paused ({PAUSED_REPLICAS}={annotations[PAUSED_REPLICAS]}), "
            "by someone else or a run that was killed; lift it when it is yours: "
            f"kubectl -n {kubectl.namespace} annotate scaledobject {bench.deployment} {PAUSED_REPLICAS}-"
        )
    kubectl.run("annotate", "scaledobject", bench.deployment, f"{PAUSED_REPLICAS}=1")


def clean_up(
    kubectl: Kubectl, unfinished: Sequence[str], held: Sequence[Bench], secret: TokenSecret | None
) -> list[str]:
    """Stop the Jobs that did not finish (their figures would be of an autoscaled Deployment once the hold is
    lifted), lift the holds, delete the token; each step whatever the others did. What failed, with its command."""
    commands = [("delete", "job", name, "--ignore-not-found") for name in unfinished]
    commands += [("annotate", "scaledobject", bench.deployment, f"{PAUSED_REPLICAS}-") for bench in held]
    if secret is not None:
        commands.append(("delete", "secret", TOKEN_SECRET, "--ignore-not-found"))
    problems = []
    for command in commands:
        try:
            kubectl.run(*command)
        except Failure as exc:
            problems.append(f"{exc}; do it by hand: kubectl -n {kubectl.namespace} {' '.join(command)}")
    return problems


def wait_one_ready(
    kubectl: Kubectl, bench: Bench, timeout_s: float, sleep: Callable[[float], None], tick: Callable[[], None]
) -> None:
    """Until KEDA has taken the pause (its HPA gone, status.pausedReplicaCount 1: kedacore/keda@v2.20.1
    apis/keda/v1alpha1/scaledobject_types.go) and the Deployment has exactly one pod, ready. `tick` runs at
    every look (the token's renewal)."""
    deadline = time.monotonic() + timeout_s
    while True:
        paused = kubectl.get("scaledobject", bench.deployment).get("status", {}).get("pausedReplicaCount")
        status = kubectl.get("deployment", bench.deployment).get("status", {})
        if paused == 1 and status.get("replicas") == 1 and status.get("readyReplicas") == 1:
            return
        if time.monotonic() > deadline:
            raise Failure(
                f"{bench.deployment} did not settle at one ready replica in {timeout_s:.0f} s (KEDA's paused "
                f"replicas {paused}, replicas {status.get('replicas')}, ready {status.get('readyReplicas', 0)}): "
                f"kubectl -n {kubectl.namespace} describe scaledobject,deployment {bench.deployment}"
            )
        tick()
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
    jobs: Sequence[str],
    outcomes: dict[str, str],
    timeout_s: float,
    sleep: Callable[[float], None],
    tick: Callable[[], None],
) -> None:
    """Fill `outcomes` with each Job's; `tick` runs at every round (the token's renewal). A few failed looks in a
    row are waited out; more stop the run."""
    deadline = time.monotonic() + timeout_s
    failures = 0
    while len(outcomes) < len(jobs):
        try:
            for name in jobs:
                if name not in outcomes and (outcome := job_outcome(kubectl.get("job", name))) is not None:
                    outcomes[name] = outcome
                    print(f"{name}: {outcome}", file=sys.stderr)
            failures = 0
        except Failure:
            failures += 1
            if failures > POLL_FAILURES_TOLERATED:
                raise
        if len(outcomes) == len(jobs):
            return
        if time.monotonic() > deadline:
            raise Failure(f"the benchmark Jobs did not finish in {timeout_s:.0f} s: kubectl get jobs,pods")
        tick()
        sleep(POLL_S)


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
    parser.add_argument("--stack", help="the serving stack's name (for its outputs)")
    parser.add_argument("--region", help="its region (default: your AWS configuration's)")
    parser.add_argument("--namespace", help="the serving namespace (servingNamespace)")
    parser.add_argument(
        "--accelerator", action="append", default=[], choices=("neuron", "gpu"), help="only this one (repeatable)"
    )
    parser.add_argument("--results-file", type=Path, help="write each accelerator's section into this markdown file")
    parser.add_argument("--ready-timeout-s", type=float, default=1800, help="for one ready replica (a node may start)")
    parser.add_argument("--timeout-s", type=float, default=4 * 3600, help="for the Jobs (each has its own deadline)")
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl command")
    args = parser.parse_args(argv)
    if not (args.stack and args.namespace):
        parser.error(
            "give --stack and --namespace: the stack's LlmBenchmarkCommand output has them "
            '(aws cloudformation describe-stacks --stack-name SdOnEksServing --query "Stacks[0].Outputs")'
        )
    return args


def run(
    args: argparse.Namespace,
    token_source: Callable[[], Token],
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Hold, sign in, run, collect; then always release. 0 when every Job completed."""
    kubectl = Kubectl(args.namespace, args.kubectl)
    try:
        chosen = benches(kubectl, args.accelerator)
    except Failure as exc:
        print(f"llm_bench.cluster: {exc}", file=sys.stderr)
        return 1
    secret = TokenSecret(kubectl, token_source) if any(b.signed_in for b in chosen) else None
    tick = secret.renew_if_due if secret is not None else (lambda: None)
    held: list[Bench] = []
    started: dict[str, Bench] = {}
    outcomes: dict[str, str] = {}
    problems: list[str] = []
    try:
        if secret is not None:
            secret.put()
        for bench in chosen:
            hold_one_replica(kubectl, bench)
            held.append(bench)
        for bench in chosen:
            print(f"waiting for one ready {bench.deployment} replica", file=sys.stderr)
            wait_one_ready(kubectl, bench, args.ready_timeout_s, sleep, tick)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for bench in chosen:
            name = f"{bench.cronjob}-{stamp}"
            kubectl.run("create", "job", name, f"--from=cronjob/{bench.cronjob}")
            started[name] = bench
            print(f"started job/{name}", file=sys.stderr)
        wait_jobs(kubectl, list(started), outcomes, args.timeout_s, sleep, tick)
        for name, bench in started.items():
            problems += collect(kubectl, name, outcomes[name], bench, args.results_file)
    except Failure as exc:
        problems.append(str(exc))
    finally:
        problems += clean_up(kubectl, [n for n in started if n not in outcomes], held, secret)
    for problem in problems:
        print(f"llm_bench.cluster: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse and run against the stack's Cognito client."""
    args = parse_args(argv)

    outputs: dict[str, str] = {}

    def token() -> Token:
        import httpx
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            outputs.update(outputs or stack_outputs(args.stack, args.region))  # read once, renewals reuse them
            return client_credentials_token(outputs, args.region)
        except (BotoCoreError, ClientError, httpx.HTTPError) as exc:
            raise Failure(f"cannot get a token for stack {args.stack}: {exc}") from exc

    return run(args, token)


if __name__ == "__main__":
    sys.exit(main())
