"""The LLM compile check over moto's S3: files and a completion marker under compiled-llm/, skipped when the
stack compiles nothing for the LLM."""

from __future__ import annotations

import json

import boto3

from tests.verify.conftest import OUTPUTS, REGION, run
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
