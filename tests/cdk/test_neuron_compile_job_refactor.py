"""The image model's compile Job, CronJob, ServiceAccount, wait init container and re-run command are what they
were before the compile-once pattern was shared with the LLM (cdk/serving/compile_job.py CompileJob):
the same dicts, in the same key order (the manifest text the template embeds), for the shipped settings and
for another node size and deadline. tests/cdk/data/sd_neuron_compile_before_refactor.json was written by the
code before the refactor (commit f654e80); since then only the compile's and the wait's size arguments and the
artifact prefix changed, by hand, to the per-size layout (`--shape=WxH`, `--tensor-parallel-size`, `b<batch>-tp<N>/`),
and the Job's name with them (its hash covers the sizes and the tensor parallel degree: the pod template is
immutable)."""

from __future__ import annotations

import json
from pathlib import Path

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
    for what, before in BEFORE[variant].items():
        assert json.dumps(now[what]) == json.dumps(before), what
