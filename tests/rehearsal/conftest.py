"""The pod rehearsal's fixtures: the containers of the shipped synth (and of the trial profile's), and what the
deploy leaves in AWS."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdk.build import STACK_PREFIX
from cdk.config import AppConfig
from tests.llm.test_gateway_image import image_python  # noqa: F401 - the gateway image's Python, a fixture
from tests.rehearsal.images import python_env
from tests.rehearsal.pods import Container, LocalValues, containers, kubernetes_manifests
from tests.rehearsal.sandbox import SEED, Outcome, bwrap_unusable, rehearse
from tools.image_locks import REPO_ROOT

SERVING_STACK = f"{STACK_PREFIX}Serving"


@dataclass(frozen=True)
class Stacks:
    """The serving stack's containers with local values, and the AWS resources the deploy creates."""

    config: AppConfig
    values: LocalValues
    manifests: list[dict[str, Any]]  # the Kubernetes objects the serving stack applies, values local
    containers: dict[str, Container]  # by label

    @property
    def resources(self) -> dict[str, Any]:
        """The plan's buckets, queues (name -> URL) and topics."""
        return {
            "buckets": sorted(self.values.buckets.values()),
            "queues": {name: self.values.ref(logical) for logical, name in self.values.queues.items()},
            "topics": sorted(self.values.topics.values()),
            "repositories": sorted(self.values.repositories.values()),
        }


def read_stacks(synth: Any) -> Stacks:
    """A synth's serving stack, read as the rehearsal runs it (skipped where bubblewrap cannot sandbox)."""
    unusable = bwrap_unusable()
    if unusable:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {unusable}; .ci/run installs bubblewrap with apt")
        pytest.skip(f"the pod rehearsal needs bubblewrap: {unusable}")
    template = synth.raw_templates[SERVING_STACK]
    values = LocalValues(region=synth.config.environment.region, resources=template["Resources"])
    manifests = list(kubernetes_manifests(template, values))
    found = {c.label: c for c in containers(manifests)}
    return Stacks(config=synth.config, values=values, manifests=manifests, containers=found)


@pytest.fixture(scope="session")
def stacks(platform_synth: Any) -> Stacks:
    """The shipped synth's serving stack, read as the rehearsal runs it."""
    return read_stacks(platform_synth)


@pytest.fixture(scope="session")
def sdxl_stacks(sdxl_synth: Any) -> Stacks:
    """`-c imageModel=sdxl-base`'s serving stack, read as the rehearsal runs it."""
    return read_stacks(sdxl_synth)


@pytest.fixture(scope="session")
def flux_stacks(flux_synth: Any) -> Stacks:
    """`-c imageModel=flux-schnell`'s serving stack, read as the rehearsal runs it."""
    return read_stacks(flux_synth)


@pytest.fixture(scope="session")
def trial_stacks(trial_synth: Any) -> Stacks:
    """The trial profile's serving stack (`-c profile=trial`: the starting gate in front of the pool)."""
    return read_stacks(trial_synth)


@pytest.fixture(scope="session")
def seed_dir(stacks: Stacks, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the rehearsals upload (mounted read-only at SEED): the built-in model's weights in the diffusers
    layout the deploy stages, written by the Neuron image's transformers 4 (the key names Hub repositories
    have; transformers 5 writes the text encoder's without their `text_model.` prefix, which 4 cannot load)."""
    folder = tmp_path_factory.mktemp("rehearsal-seed")
    script = "import sys; from pathlib import Path; from app.models.builtin import TINY; "
    script += "from app.models.random_pipeline import materialize; materialize(TINY, Path(sys.argv[1]))"
    python = python_env("neuron") / "bin" / "python"
    subprocess.run([str(python), "-c", script, str(folder / "models")], cwd=REPO_ROOT, check=True, capture_output=True)
    return folder


def seeded_weights(seed_dir: Path) -> str:
    """The sandbox path of the weights folder under `seed_dir`."""
    (weights,) = [p for p in (seed_dir / "models").iterdir() if p.is_dir()]
    return f"{SEED}/models/{weights.name}"


def rehearse_container(stacks: Stacks, label: str, seed_dir: Path, tmp_path: Path, **kwargs: Any) -> Outcome:
    """Rehearse the container `label` of `stacks`, with the deploy's resources created."""
    return rehearse(
        stacks.containers[label],
        tmp_path / "sandbox",
        seed_dir,
        region=stacks.values.region,
        resources=stacks.resources,
        **kwargs,
    )


@pytest.fixture
def run(stacks: Stacks, seed_dir: Path, tmp_path: Path) -> Callable[..., Outcome]:
    """Rehearse one container by label, with the deploy's resources created."""

    def run_one(label: str, **kwargs: Any) -> Outcome:
        return rehearse_container(stacks, label, seed_dir, tmp_path, **kwargs)

    return run_one
