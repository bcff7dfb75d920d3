"""The LLM compile check over moto's S3: files and a completion marker under compiled-llm/, skipped when the
stack compiles nothing for the LLM."""

from __future__ import annotations

import json

import boto3

from common import metric_names
from tests.verify.conftest import OUTPUTS, REGION, deployment, run
from verify import llm
from verify.result import Status
from verify.stacks import SERVING

BUCKET = OUTPUTS[SERVING]["ModelStoreBucket"]


def test_the_llm_compile_wrote_files_and_its_marker(aws, make_context):
    outputs = json.loads(json.dumps(OUTPUTS))
    outputs[SERVING]["LlmNeuronCompileRerunCommand"] = "kubectl -n sd create job --from=cronjob/llm-neuron-compile x"
    ctx = make_context(outputs=outputs)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    prefix = f"{llm.ARTIFACTS_ROOT}/qwen--qwen2.5-1.5b-instruct/tp1-abc/"

    assert run(llm.compiled_artifacts, ctx).status == Status.FAIL
    s3.put_object(Bucket=BUCKET, Key=prefix + "model.pt", Body=b"x")
    unfinished = run(llm.compiled_artifacts, ctx)
    assert unfinished.status == Status.FAIL and unfinished.evidence.startswith("1 files and no _COMPLETE.json")
    s3.put_object(Bucket=BUCKET, Key=prefix + "_COMPLETE.json", Body=b"{}")
    assert run(llm.compiled_artifacts, ctx).evidence == f"1 files; {prefix}_COMPLETE.json"


def test_without_an_llm_compile_the_check_skips(make_context):
    assert run(llm.compiled_artifacts, make_context()).status == Status.SKIP


def llm_deployment(name: str) -> dict:
    made = deployment(name)
    made["spec"]["template"]["metadata"] = {"labels": {"app.kubernetes.io/name": "llm"}}
    return made


def test_every_llm_metric_arrives_for_each_llm_deployment(aws, cluster, make_context):
    outputs = json.loads(json.dumps(OUTPUTS))
    outputs[SERVING]["LlmBaseUrl"] = "https://d111111abcdef8.cloudfront.net/v1"
    cluster.add("deployments", llm_deployment("llm-gpu"), deployment("sd-gpu"))
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    names = [m.name for m in metric_names.LLM_METRICS]

    def publish(*metrics: str) -> None:
        unit = [{"Name": metric_names.DIMENSION_DEPLOYMENT_UNIT, "Value": "llm-gpu"}]
        data = [{"MetricName": m, "Dimensions": unit, "Value": 1.0} for m in metrics]
        cloudwatch.put_metric_data(Namespace=metric_names.NAMESPACE, MetricData=data)

    publish(*names[:-1])
    partial = run(llm.metrics_arrive, make_context(outputs=outputs))
    assert partial.status == Status.FAIL and partial.evidence == f"not yet in CloudWatch: llm-gpu {names[-1]}"
    publish(names[-1])
    assert run(llm.metrics_arrive, make_context(outputs=outputs)).evidence == f"{len(names)} metrics for llm-gpu"
    assert run(llm.metrics_arrive, make_context()).status == Status.SKIP
