"""The LLM compile Job's `publish` step, run the way its pod runs it (sandbox.py): its user, its read-only root,
its emptyDirs at their sizes, exactly the manifest's command, arguments and environment, no network, S3 on a
local moto server. The compile step before it leaves artifacts on the scratch volume; here a fake artifacts
folder stands in for them (the compile itself needs an Inferentia2 chip).

The gateway image does not copy model_fetch and the model store modules yet (llm_gateway/Dockerfile):
GATEWAY_FILES is what it must add for this step, bound at its WORKDIR as the image would hold them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.model_store.layout import COMPLETE_MARKER
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.llm import compile_job as lcj
from tests.cdk.conftest import DEFAULT_CONTEXT
from tests.rehearsal.pods import MOTO_ENDPOINT, Volume, size_bytes
from tests.rehearsal.sandbox import Spec, bwrap_unusable, run_sandbox
from tools.image_locks import REPO_ROOT

GATEWAY_WORKDIR = "/srv"  # llm_gateway/Dockerfile WORKDIR
GATEWAY_USER = 10001  # llm_gateway/Dockerfile USER
GATEWAY_FILES = {
    "app/__init__.py": "app/__init__.py",
    "app/model_store/__init__.py": "app/model_store/__init__.py",
    "app/model_store/layout.py": "app/model_store/layout.py",
    "app/model_store/marker.py": "app/model_store/marker.py",
    "app/model_store/upload.py": "app/model_store/upload.py",
    "model_fetch": "model_fetch",
}
ARGS = {
    "gateway_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:llm-gateway-abc",
    "bucket": "model-store",
    "weights_prefix": "models/qwen--qwen2.5-1.5b-instruct/",
    "region": "us-east-1",
}
# A compile's output, in miniature (NxD Inference writes model.pt and the configs; a sharded checkpoint when asked).
FAKE_ARTIFACTS = {
    "model.pt": b"\0" * 300_000,
    "neuron_config.json": b'{"tp_degree": 2}',
    "weights/tp0_sharded_checkpoint.safetensors": b"\1" * 1000,
}


@pytest.fixture(scope="module")
def publish_step():
    unusable = bwrap_unusable()
    if unusable:
        pytest.skip(f"the pod rehearsal needs bubblewrap: {unusable}")
    llm = LlmConfig.from_context(DEFAULT_CONTEXT | {"llmEnabled": True}, instance_families={"neuron": ["inf2"]})
    serving = ServingConfig.from_context(DEFAULT_CONTEXT)
    assert llm is not None
    job = lcj.compile_job(llm, serving, **ARGS)
    pod = job.job()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "publish"
    return llm, pod, container


def rehearse_publish(pod, container, work: Path, artifacts: dict[str, bytes]):
    sizes = {v["name"]: v["emptyDir"] for v in pod["volumes"]}
    volumes = tuple(
        Volume(m["name"], m["mountPath"], size_bytes(sizes[m["name"]]["sizeLimit"]), False)
        for m in container["volumeMounts"]
    )
    security = {**pod["securityContext"], **container["securityContext"]}
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsUser"] == GATEWAY_USER
    binds = tuple((str(REPO_ROOT / src), f"{GATEWAY_WORKDIR}/{dst}") for src, dst in GATEWAY_FILES.items())
    spec = Spec(security["runAsUser"], security["runAsGroup"], "llm-neuron-compile-rehearsal", volumes, binds, "/srv")
    work.mkdir(parents=True)
    (work / "tmp").mkdir()
    fake = work / "artifacts"
    fake.mkdir()
    for relative, body in artifacts.items():
        (fake / relative).parent.mkdir(parents=True, exist_ok=True)
        (fake / relative).write_bytes(body)
    env = {e["name"]: e["value"] for e in container["env"]}
    src = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--src="))
    plan = {
        "region": ARGS["region"],
        "buckets": [ARGS["bucket"]],
        "queues": {},
        "topics": [],
        "staged": [],
        "compiled": [],
        # What the compile step left on the scratch volume.
        "copies": [{"from": "/rehearsal/artifacts", "to": src}],
        "argv": [*container["command"], *container["args"]],
        "env": {
            "PATH": f"{sys.prefix}/bin:/usr/bin:/bin",
            **env,
            "AWS_ENDPOINT_URL": MOTO_ENDPOINT,
            "AWS_ACCESS_KEY_ID": "rehearsal",
            "AWS_SECRET_ACCESS_KEY": "rehearsal",
        },
        "cwd": GATEWAY_WORKDIR,
        "mode": "exit",
        "kube": None,
    }
    seed = work / "seed"
    seed.mkdir()
    return run_sandbox(spec, work, seed, plan, timeout_s=90)


def test_publish_uploads_the_artifacts_then_the_marker(publish_step, tmp_path):
    llm, pod, container = publish_step
    outcome = rehearse_publish(pod, container, tmp_path / "run", FAKE_ARTIFACTS)
    assert outcome.returncode == 0, outcome
    prefix = lcj.artifact_prefix(llm)
    keys = outcome.s3_keys(ARGS["bucket"])
    assert {k: v for k, v in keys.items() if k != prefix + COMPLETE_MARKER} == {
        prefix + relative: len(body) for relative, body in FAKE_ARTIFACTS.items()
    }
    assert keys[prefix + COMPLETE_MARKER] > 0
    assert f"published {len(FAKE_ARTIFACTS)} files to s3://{ARGS['bucket']}/{prefix}" in outcome.log


def test_an_empty_compile_publishes_no_marker(publish_step, tmp_path):
    _, pod, container = publish_step
    outcome = rehearse_publish(pod, container, tmp_path / "run", {})
    assert outcome.returncode == 1, outcome
    assert "holds no files" in outcome.log
    assert outcome.s3_keys(ARGS["bucket"]) == {}
