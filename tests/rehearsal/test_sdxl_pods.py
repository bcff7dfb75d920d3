"""The pods of `-c imageModel=sdxl-base`, rehearsed as the cluster runs them (one extra synth per session, shared
with tests/cdk/test_image_model_synth.py): the GPU pod with the preset's env and volumes serves its probes up to the
missing GPU and drains; the Neuron pods' wait ends on the SDXL artifacts' prefix. Their weights are the built-in
model's (the rehearsal stops before a pipeline loads them), staged under SDXL's prefix."""

from __future__ import annotations

from pathlib import Path

from cdk.image import neuron_compile_job as njob
from common.model_store.layout import shape_prefix, split_s3_uri
from common.probe_paths import HEALTH_PATH
from tests.rehearsal.conftest import Stacks, seeded_weights
from tests.rehearsal.sandbox import rehearse

GPU_SERVICE = "Deployment/sd-gpu:sd"
WAIT_INIT = "Deployment/sd-neuron:wait-for-compiled-model"


def _run(stacks: Stacks, label: str, seed_dir: Path, tmp_path: Path, **kwargs):
    return rehearse(
        stacks.containers[label],
        tmp_path / "sandbox",
        seed_dir,
        region=stacks.values.region,
        resources=stacks.resources,
        **kwargs,
    )


def test_the_sdxl_gpu_pod_starts_and_stops_only_for_want_of_a_gpu(sdxl_stacks, seed_dir, tmp_path):
    container = sdxl_stacks.containers[GPU_SERVICE]
    cfg = sdxl_stacks.config.serving
    assert cfg.model_id == "stabilityai/stable-diffusion-xl-base-1.0"
    bucket, _ = split_s3_uri(container.env["MODEL_ID"])
    staged = {"bucket": bucket, "model_id": cfg.model_id, "from_dir": seeded_weights(seed_dir)}
    service = {"stop_marker": "load failed", "stop_timeout_s": cfg.shutdown_grace_s + 10, "paths": [HEALTH_PATH]}
    outcome = _run(sdxl_stacks, GPU_SERVICE, seed_dir, tmp_path, staged=[staged], service=service, timeout_s=180)
    assert (outcome.report.get("readiness") or {}).get("status") == 503, outcome
    assert "BACKEND=cuda but torch sees no CUDA device" in outcome.log, outcome
    assert outcome.report["paths"][HEALTH_PATH][0] == 200, outcome
    assert outcome.returncode in (0, -15), outcome


def test_the_sdxl_neuron_pods_wait_ends_once_its_shapes_are_published(sdxl_stacks, seed_dir, tmp_path):
    container = sdxl_stacks.containers[WAIT_INIT]
    args = dict(a.removeprefix("--").split("=", 1) for a in container.args or () if a.startswith("--"))
    assert args["prefix"] == njob.artifact_prefix(sdxl_stacks.config.serving)
    assert args["prefix"].endswith("/b1-tp1/")
    # Each size is its own folder with its own completion marker, as the compile Job publishes them.
    compiled = [
        {
            "bucket": args["bucket"],
            "prefix": shape_prefix(args["prefix"], size),
            "files": {"model_index.json": "{}"},
            "marker": {"files": []},
        }
        for size in njob.compile_sizes(sdxl_stacks.config.serving)
    ]
    outcome = _run(sdxl_stacks, WAIT_INIT, seed_dir, tmp_path, compiled=compiled, timeout_s=60)
    assert outcome.returncode == 0, outcome
