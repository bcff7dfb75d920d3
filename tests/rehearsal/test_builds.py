"""The build rehearsal: every CodeBuild project of the stacks, run the way CodeBuild runs it (builds.py),
against moto for AWS, a local Hub and a local wheel folder for PyPI:

- the weights staging: with the model on the Hub, installs its pinned requirements, downloads the model and
  leaves it in the model store with its completion marker, as the serving stack expects;
- the image builds: with their image already pushed by an earlier deploy, every command before the first
  `docker` one runs (the repository and tag the project passes are found, so the build says it has nothing
  to build); Docker itself is not available here, so the build stops there.
"""

from __future__ import annotations

import json

import pytest

from cdk.build import STACK_PREFIX
from common.model_store.layout import COMPLETE_MARKER, weights_prefix
from tests.rehearsal.builds import Build, projects, runtime_python, wheelhouse
from tests.rehearsal.conftest import seeded_weights
from tests.rehearsal.pods import UNRESOLVED, LocalValues
from tests.rehearsal.sandbox import SEED, rehearse_build
from tools.image_locks import REPO_ROOT

STAGING = "WeightsStagingProject"
LLM_STAGING = "LlmWeightsStagingProject"  # llmEnabled: the language model's staging
IMAGE_BUILDS = ("ImagesNeuronBuild", "ImagesNvidiaBuild", "ImagesRoutingControllerBuild", "ImagesLlmGatewayBuild")


@pytest.fixture(scope="module")
def builds(stacks, platform_synth) -> dict[str, tuple[Build, dict]]:
    """Each project by the start of its logical id, with the AWS resources of its stack."""
    found = {}
    for name in ("Serving", "Images"):
        template = platform_synth.raw_templates[f"{STACK_PREFIX}{name}"]
        values = LocalValues(region=stacks.values.region, resources=template["Resources"])
        for logical_id, build in projects(template, values).items():
            resources = {
                "buckets": sorted(values.buckets.values()),
                "queues": {},
                "topics": [],
                "repositories": sorted(values.repositories.values()),
            }
            found[logical_id] = (build, resources)
    return found


def _one(builds, prefix: str) -> tuple[Build, dict]:
    (key,) = [k for k in builds if k.startswith(prefix)]
    return builds[key]


def test_every_codebuild_project_is_rehearsed(builds):
    unknown = [k for k in builds if not k.startswith((STAGING, LLM_STAGING, *IMAGE_BUILDS))]
    assert not unknown, f"CodeBuild projects without a rehearsal: {unknown}"
    for build, _ in builds.values():
        assert not [v for v in build.env.values() if UNRESOLVED in v], build


def test_the_weights_staging_build_leaves_the_model_in_the_store(stacks, builds, seed_dir, tmp_path):
    build, resources = _one(builds, STAGING)
    wheels = wheelhouse(REPO_ROOT / "requirements-stage.txt", runtime_python(build))
    # The deploy pins one commit (servingModelRevision); the local Hub holds the model at that commit.
    revision = build.env["MODEL_REVISION"]
    hub = {"repo_id": build.env["MODEL_ID"], "folder": seeded_weights(seed_dir), "sha": revision}
    outcome = rehearse_build(
        build, tmp_path, seed_dir, region=stacks.values.region, resources=resources, hub=hub, wheels=wheels
    )
    assert outcome.returncode == 0, outcome
    prefix = weights_prefix(build.env["MODEL_ID"])
    keys = outcome.s3_keys(build.env["MODEL_BUCKET"])
    assert prefix + COMPLETE_MARKER in keys and prefix + "model_index.json" in keys, outcome
    assert any(key.endswith(".safetensors") for key in keys), outcome
    asked = [tuple(r) for r in outcome.report["hub_requests"]]
    assert ("GET", f"/api/models/{build.env['MODEL_ID']}/revision/{revision}") in asked, outcome


def test_the_language_models_staging_checks_its_heads_and_leaves_it_in_the_store(stacks, builds, seed_dir, tmp_path):
    build, resources = _one(builds, LLM_STAGING)
    llm = stacks.config.llm
    assert llm is not None and build.env["MODEL_ID"] == llm.model_id
    wheels = wheelhouse(REPO_ROOT / "requirements-stage.txt", runtime_python(build))
    # A language model in the transformers layout, in miniature, with the heads the settings name.
    folder = seed_dir / "llm-model"
    folder.mkdir(exist_ok=True)
    config = {"num_attention_heads": llm.attention_heads, "num_key_value_heads": llm.kv_heads}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"w" * 4096)
    (folder / "model.gguf").write_bytes(b"q" * 512)  # another format on the Hub: not staged
    hub = {"repo_id": llm.model_id, "folder": f"{SEED}/llm-model", "sha": "1" * 40}
    outcome = rehearse_build(
        build, tmp_path, seed_dir, region=stacks.values.region, resources=resources, hub=hub, wheels=wheels
    )
    assert outcome.returncode == 0, outcome
    prefix = weights_prefix(llm.model_id)
    keys = outcome.s3_keys(build.env["MODEL_BUCKET"])
    assert sorted(k.removeprefix(prefix) for k in keys) == [
        COMPLETE_MARKER,
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ], outcome


@pytest.mark.parametrize("prefix", IMAGE_BUILDS)
def test_an_image_build_runs_every_command_up_to_docker(stacks, builds, seed_dir, tmp_path, prefix):
    build, resources = _one(builds, prefix)
    repository = build.env["REPOSITORY_URI"].split("/", 1)[1]
    pushed = [{"repository": repository, "tag": build.env["IMAGE_TAG"]}]
    outcome = rehearse_build(build, tmp_path, seed_dir, region=stacks.values.region, resources=resources, images=pushed)
    assert f"image {build.env['REPOSITORY_URI']}:{build.env['IMAGE_TAG']} exists; nothing to build" in outcome.log, (
        outcome
    )
    (failed, *_) = outcome.report.get("failed_commands") or ["none"]
    phase, index, _ = failed.split()
    command = build.buildspec["phases"][phase]["commands"][int(index)]
    assert "docker" in command, f"stopped before docker, at {phase} command {index}: {command}\n{outcome}"
