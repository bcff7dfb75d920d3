"""The image model's compile Job, CronJob, ServiceAccount, wait init container and re-run command are what they
were before the compile-once pattern was shared with the LLM (cdk/serving/compile_job.py CompileJob):
the same dicts, in the same key order (the manifest text the template embeds), for the shipped settings and
for another node size and deadline. tests/cdk/data/sd_neuron_compile_before_refactor.json was written by the
code before the refactor (commit f654e80). Since then the compile also takes the shape list and the tensor parallel
degree (`--shape`, `--tensor-parallel-size`, issue 23), which are part of the Job's name: those are taken out of the
comparison and checked on their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdk.config.serving import ServingConfig
from cdk.image import neuron_compile_job as njob
from tests.cdk.conftest import DEFAULT_CONTEXT

BEFORE = json.loads((Path(__file__).parent / "data" / "sd_neuron_compile_before_refactor.json").read_text())
ARGS = {
    "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:neuron-abc",
    "bucket": "model-store",
    "region": "us-east-1",
}
VARIANTS = {"default": {}, "bigger": {"neuronCompileCpu": 20, "neuronCompileTimeoutSeconds": 5400}}


NEW_ARGS = ("--shape=", "--tensor-parallel-size=")


def before_shapes(obj: Any) -> Any:
    """`obj` without the args the shape list added (a copy)."""
    if isinstance(obj, dict):
        return {k: before_shapes(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [before_shapes(v) for v in obj if not (isinstance(v, str) and v.startswith(NEW_ARGS))]
    return obj


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_image_models_compile_objects_are_unchanged(variant):
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT | VARIANTS[variant])
    now = {
        "job": njob.compile_job(cfg, **ARGS),
        "cronjob": njob.rerun_cronjob(cfg, **ARGS),
        "service_account": njob.compile_service_account(cfg),
        "wait_init": njob.wait_init_container(cfg, **ARGS),
        "rerun_command": njob.rerun_command(cfg),
        "artifact_prefix": njob.artifact_prefix(cfg),
    }
    assert [a for a in now["job"]["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith(NEW_ARGS)] == [
        "--shape=512x512",
        "--tensor-parallel-size=1",
    ]
    # The Job's name hashes its pod template, which now holds the shape list: a new Job, which finds the artifacts
    # the old one published under the unchanged prefix (`artifact_prefix` below) and skips the compile.
    assert now["job"]["metadata"]["name"] != BEFORE[variant]["job"]["metadata"]["name"]
    now["job"]["metadata"]["name"] = BEFORE[variant]["job"]["metadata"]["name"]
    for what, before in BEFORE[variant].items():
        assert json.dumps(before_shapes(now[what])) == json.dumps(before), what
