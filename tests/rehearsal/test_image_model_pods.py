"""The pods of `-c imageModel=sdxl-base` and `-c imageModel=flux-schnell`, rehearsed as the cluster runs them (one
extra synth per preset and session, the SDXL one shared with tests/cdk/test_image_model_synth.py): the GPU pod with
the preset's env and volumes serves its probes up to the missing GPU and drains; the Neuron pods' wait ends on the
preset's artifacts, one folder per compiled size. Their weights are the built-in model's (the rehearsal stops before
a pipeline loads them), staged under the preset's prefix."""

from __future__ import annotations

import pytest

from cdk.image import neuron_compile_job as njob
from cdk.image.presets import PRESETS
from common.model_store.layout import shape_prefix, split_s3_uri
from common.probe_paths import HEALTH_PATH
from tests.rehearsal.conftest import Stacks, rehearse_container, seeded_weights

GPU_SERVICE = "Deployment/sd-gpu:sd"
WAIT_INIT = "Deployment/sd-neuron:wait-for-compiled-model"


@pytest.fixture(params=["sdxl-base", "flux-schnell"])
def image_model_stacks(request: pytest.FixtureRequest) -> Stacks:
    """The serving stack of one catalog preset, as the rehearsal reads it."""
    stacks = request.getfixturevalue("sdxl_stacks" if request.param == "sdxl-base" else "flux_stacks")
    assert stacks.config.serving.model_id == PRESETS[request.param].model_id.value
    return stacks


def test_the_gpu_pod_starts_and_stops_only_for_want_of_a_gpu(image_model_stacks, seed_dir, tmp_path):
    container = image_model_stacks.containers[GPU_SERVICE]
    cfg = image_model_stacks.config.serving
    bucket, _ = split_s3_uri(container.env["MODEL_ID"])
    staged = {"bucket": bucket, "model_id": cfg.model_id, "from_dir": seeded_weights(seed_dir)}
    service = {"stop_marker": "load failed", "stop_timeout_s": cfg.shutdown_grace_s + 10, "paths": [HEALTH_PATH]}
    outcome = rehearse_container(
        image_model_stacks, GPU_SERVICE, seed_dir, tmp_path, staged=[staged], service=service, timeout_s=180
    )
    assert (outcome.report.get("readiness") or {}).get("status") == 503, outcome
    assert "BACKEND=cuda but torch sees no CUDA device" in outcome.log, outcome
    assert outcome.report["paths"][HEALTH_PATH][0] == 200, outcome
    assert outcome.returncode in (0, -15), outcome


def test_the_neuron_pods_wait_ends_once_every_size_is_published(image_model_stacks, seed_dir, tmp_path):
    container = image_model_stacks.containers[WAIT_INIT]
    cfg = image_model_stacks.config.serving
    args = dict(a.removeprefix("--").split("=", 1) for a in container.args or () if a.startswith("--"))
    assert args["prefix"] == njob.artifact_prefix(cfg)
    assert args["prefix"].endswith(f"/b1-tp{cfg.compile_settings.tensor_parallel_size}/")
    # Each size is its own folder with its own completion marker, as the compile Job publishes them.
    compiled = [
        {
            "bucket": args["bucket"],
            "prefix": shape_prefix(args["prefix"], size),
            "files": {"model_index.json": "{}"},
            "marker": {"files": []},
        }
        for size in njob.compile_sizes(cfg)
    ]
    outcome = rehearse_container(image_model_stacks, WAIT_INIT, seed_dir, tmp_path, compiled=compiled, timeout_s=60)
    assert outcome.returncode == 0, outcome
