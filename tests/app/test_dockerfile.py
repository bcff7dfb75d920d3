"""The container recipe (it cannot be built here: no Docker engine); parse it for the contract."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "app" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def test_base_image_and_accelerator_are_build_arguments():
    parsed = instructions()
    assert parsed[0] == ("ARG", "BASE_IMAGE")
    assert ("FROM", "${BASE_IMAGE}") in parsed
    args = {rest.split("=")[0] for keyword, rest in parsed if keyword == "ARG"}
    assert {"BASE_IMAGE", "ACCELERATOR", "OPTIMUM_NEURON_VERSION"} <= args


def test_optimum_neuron_is_pinned_never_latest():
    # No default: the version comes from cdk/versions.py through the image build, and a Neuron
    # build without it stops with a message instead of installing whatever is newest.
    (declared,) = [rest for keyword, rest in instructions() if rest.startswith("OPTIMUM_NEURON_VERSION")]
    assert declared == "OPTIMUM_NEURON_VERSION"
    assert "OPTIMUM_NEURON_VERSION is required for neuron" in DOCKERFILE.read_text()
    assert '"optimum-neuron==${OPTIMUM_NEURON_VERSION}"' in DOCKERFILE.read_text()


def test_dlc_torch_is_kept_by_a_constraints_file():
    runs = " ".join(rest for keyword, rest in instructions() if keyword == "RUN")
    assert "pip freeze" in runs and "-r /srv/requirements.txt -c /tmp/keep-dlc-torch.txt" in runs


def test_copies_only_the_service_and_its_requirements():
    copies = [rest for keyword, rest in instructions() if keyword == "COPY"]
    assert copies == ["requirements.txt /srv/requirements.txt", "app /srv/app"]


def test_runs_as_a_non_root_user_and_starts_the_service():
    parsed = instructions()
    users = [rest for keyword, rest in parsed if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_user = max(i for i, (keyword, _) in enumerate(parsed) if keyword == "USER")
    assert all(keyword != "RUN" for keyword, _ in parsed[last_user:])  # nothing runs as root after it
    assert ("EXPOSE", "8000") in parsed
    (cmd,) = [rest for keyword, rest in parsed if keyword == "CMD"]
    assert json.loads(cmd) == ["python", "-m", "app"]
    assert "MODEL_CACHE_DIR=/var/cache/sd-model" in DOCKERFILE.read_text()
