"""The image model's compile Job, CronJob, ServiceAccount, wait init container and re-run command are what they
were before the compile-once pattern was shared with the LLM (cdk/serving/compile_job.py CompileJob):
the same dicts, in the same key order (the manifest text the template embeds), for the shipped settings and
for another node size and deadline. tests/cdk/data/sd_neuron_compile_before_refactor.json was written by the
code before the refactor (commit f654e80); since then, by hand: the compile's and the wait's size arguments and the
artifact prefix follow the per-size layout (`--shape=WxH`, `--tensor-parallel-size`, `b<batch>-tp<N>/`); the Job and
CronJob pods select `neuronCompileInstanceType` (pods are pinned to their instance, cdk/serving/pod_fit.py); and the
Job's name follows them (its hash covers the sizes, the degree and the instance: the pod template is immutable)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from cdk.config.serving import ServingConfig
from cdk.image import neuron_compile_job as njob
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL
from tests.cdk.conftest import DEFAULT_CONTEXT

BEFORE = json.loads((Path(__file__).parent / "data" / "sd_neuron_compile_before_refactor.json").read_text())
ARGS = {
    "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:neuron-abc",
    "bucket": "model-store",
    "region": "us-east-1",
}
VARIANTS = {"default": {}, "bigger": {"neuronCompileCpu": 20, "neuronCompileTimeoutSeconds": 5400}}


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
    expected = copy.deepcopy(BEFORE[variant])
    for job_spec in (expected["job"]["spec"], expected["cronjob"]["spec"]["jobTemplate"]["spec"]):
        job_spec["template"]["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] = cfg.compile_settings.instance.name
    before_name = expected["job"]["metadata"]["name"]
    assert now["job"]["metadata"]["name"] != before_name  # a new Job: its pod template changed
    assert now["job"]["metadata"]["name"].startswith("sd-neuron-compile-")
    expected["job"]["metadata"]["name"] = now["job"]["metadata"]["name"]
    for what, before in expected.items():
        assert json.dumps(now[what]) == json.dumps(before), what
