"""The LLM workload (llmEnabled): its compiled Neuron artifacts in the model store, and a signed-in streaming
chat completion through the front door."""

from __future__ import annotations

import json
import time
from typing import Final

import httpx

from common import metric_names
from common.model_store.layout import COMPLETE_MARKER
from verify.context import Context
from verify.front_door import TIMEOUT_S, has_programs_client
from verify.result import Check, Outcome, failed, passed, skipped, verdict
from verify.stacks import SERVING

# The model store's prefix of compiled LLM artifacts (cdk/llm/compile_job.py; tests/verify/test_names.py holds it).
ARTIFACTS_ROOT: Final = "compiled-llm"
# Every LLM pod's label (cdk/llm/workload.py APP_LABEL; tests/verify/test_names.py holds it).
LLM_POD_LABEL: Final = ("app.kubernetes.io/name", "llm")
PROMPT: Final = "Count from one to twenty, in words."
MAX_TOKENS: Final = 32


def compiled_artifacts(ctx: Context) -> Outcome:
    """The LLM compile Job wrote files and a completion marker under the model store's compiled-llm/ prefix."""
    if ctx.output(SERVING, "LlmNeuronCompileRerunCommand") is None:
        return skipped("no LLM Neuron compile in this stack (no LlmNeuronCompileRerunCommand output)")
    bucket = ctx.outputs[SERVING]["ModelStoreBucket"]
    pages = ctx.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{ARTIFACTS_ROOT}/")
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    markers = [k for k in keys if k.endswith("/" + COMPLETE_MARKER)]
    files = len(keys) - len(markers)
    if not markers:
        return failed(f"{files} files and no {COMPLETE_MARKER} under s3://{bucket}/{ARTIFACTS_ROOT}/")
    return verdict(files > 0, f"{files} files; {markers[0]}")


def llm_deployments(ctx: Context) -> list[str]:
    """The LLM Deployments: each one is a metrics DeploymentUnit (cdk/llm/names.py)."""
    key, value = LLM_POD_LABEL
    return [
        d["metadata"]["name"]
        for d in ctx.kube.items("deployments")
        if d["spec"]["template"].get("metadata", {}).get("labels", {}).get(key) == value
    ]


def metrics_arrive(ctx: Context) -> Outcome:
    """Each LLM deployment unit has published every LLM metric to CloudWatch."""
    if ctx.output(SERVING, "LlmBaseUrl") is None:
        return skipped("no LLM workload (llmEnabled is off: no LlmBaseUrl output)")
    units = llm_deployments(ctx)
    if not units:
        return failed("no LLM Deployment in the namespace")
    expected = {m.name for m in metric_names.LLM_METRICS}
    missing: list[str] = []
    for unit in units:
        dimension = {"Name": metric_names.DIMENSION_DEPLOYMENT_UNIT, "Value": unit}
        pages = (
            ctx.client("cloudwatch")
            .get_paginator("list_metrics")
            .paginate(Namespace=metric_names.NAMESPACE, Dimensions=[dimension])
        )
        found = {m["MetricName"] for page in pages for m in page["Metrics"]}
        missing += [f"{unit} {name}" for name in sorted(expected - found)]
    if missing:
        return failed(f"not yet in CloudWatch: {', '.join(missing)}")
    return passed(f"{len(expected)} metrics for {', '.join(units)}")


def streams(ctx: Context) -> Outcome:
    """A signed-in streaming chat completion through the front door arrives in several chunks."""
    base = ctx.output(SERVING, "LlmBaseUrl")
    if base is None:
        return skipped("no LLM workload (llmEnabled is off: no LlmBaseUrl output)")
    if not has_programs_client(ctx):
        return skipped("no TokenUrl output (sign-in is not Cognito): no programs' client to sign in with")
    headers = {"Authorization": f"Bearer {ctx.token()}"}
    with httpx.Client(headers=headers, timeout=TIMEOUT_S, follow_redirects=False) as client:
        listed = client.get(f"{base}/models")
        if listed.status_code != 200:
            return failed(f"GET /v1/models {listed.status_code}")
        model = listed.json()["data"][0]["id"]
        body = {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": True,
            "max_tokens": MAX_TOKENS,
        }
        started = time.monotonic()
        arrivals: list[float] = []
        done = False
        with client.stream("POST", f"{base}/chat/completions", json=body) as response:
            if response.status_code != 200:
                return failed(f"POST /v1/chat/completions {response.status_code}")
            for line in response.iter_lines():
                data = line.removeprefix("data:").strip()
                if not line.startswith("data:") or not data:
                    continue
                if data == "[DONE]":
                    done = True
                    break
                choices = json.loads(data).get("choices") or [{}]
                if (choices[0].get("delta") or {}).get("content"):
                    arrivals.append(time.monotonic() - started)
    if not arrivals or not done:
        return failed(f"{len(arrivals)} content chunks, {'[DONE]' if done else 'no [DONE]'}")
    spread_ms = (arrivals[-1] - arrivals[0]) * 1000
    evidence = f"{model}: {len(arrivals)} chunks, first at {arrivals[0] * 1000:.0f} ms, spread {spread_ms:.0f} ms"
    return verdict(len(arrivals) > 1, evidence)


CHECKS: Final = (
    Check("llm-compiled-artifacts", compiled_artifacts),
    Check("llm-front-door-streams", streams),
    Check("llm-metrics-arrive", metrics_arrive),
)
