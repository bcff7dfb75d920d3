"""The container recipe (it cannot be built here: no Docker engine); parse it for the contract."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from cdk import versions
from tools.image_locks import image_lock_specs, lock_problems

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "app" / "Dockerfile"
BUILDSPEC = ROOT / "buildspecs" / "image.yml"


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


def stages() -> dict[str, list[tuple[str, str]]]:
    """Each build stage's instructions (after its FROM), by stage name."""
    found: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            current = []
            found[rest.split(" AS ")[-1] if " AS " in rest else rest] = current
        else:
            current.append((keyword, rest))
    return found


def run_script() -> str:
    return " ".join(rest for keyword, rest in stages()["service"] if keyword == "RUN")


def test_base_image_and_accelerator_are_build_arguments():
    parsed = instructions()
    assert parsed[0] == ("ARG", "BASE_IMAGE")
    assert ("FROM", "${BASE_IMAGE} AS service") in parsed
    args = {rest.split("=")[0] for keyword, rest in parsed if keyword == "ARG"}
    assert {"BASE_IMAGE", "ACCELERATOR", "OPTIMUM_NEURON_VERSION"} <= args


def test_one_target_stage_per_accelerator_and_the_build_selects_it():
    assert set(stages()) == {"service", *versions.BASE_IMAGES}
    accelerator_bases = [rest for keyword, rest in instructions() if keyword == "FROM" and "AS service" not in rest]
    assert sorted(accelerator_bases) == [f"service AS {name}" for name in sorted(versions.BASE_IMAGES)]
    (build,) = [c for c in yaml.safe_load(BUILDSPEC.read_text())["phases"]["build"]["commands"] if "docker build" in c]
    assert '--target "$ACCELERATOR"' in build and '--build-arg ACCELERATOR="$ACCELERATOR"' in build


def test_each_image_installs_its_own_lock_resolved_for_its_python():
    # Defect 2: every image installed requirements.txt (diffusers 0.42) next to optimum-neuron, which pins
    # diffusers 0.35 and Python < 3.12. Now each installs the lock resolved for its base image's Python.
    runs = run_script()
    assert 'pip install -r "/srv/requirements/${ACCELERATOR}.lock" -c /tmp/keep-dlc.txt' in runs
    assert "requirements.txt" not in runs and "optimum-neuron==" not in runs
    assert ("COPY", "app/requirements /srv/requirements") in stages()["service"]
    for name, spec in image_lock_specs().items():
        assert spec.lock_file == ROOT / "app" / "requirements" / f"{name}.lock"
        assert lock_problems(spec) == []


def test_dlc_torch_and_neuron_sdk_are_kept_by_a_constraints_file():
    runs = run_script()
    (pattern,) = re.findall(r"grep -Ei '([^']+)'", runs)
    kept = re.compile(pattern, re.IGNORECASE)
    for line in ("torch==2.8.0", "torch-neuronx==2.8.0.2.10.16998+e9bf8a50", "neuronx-cc==2.21.33363.0+82129205"):
        assert kept.match(line), line
    assert not kept.match("torchmetrics==1.0") and not kept.match("numpy==1.23.5")


def test_a_neuron_build_stops_unless_the_lock_installed_the_pinned_optimum_neuron():
    # No default: the version comes from cdk/versions.py through the image build.
    (declared,) = [rest for keyword, rest in instructions() if rest.startswith("OPTIMUM_NEURON_VERSION")]
    assert declared == "OPTIMUM_NEURON_VERSION"
    runs = run_script()
    assert "OPTIMUM_NEURON_VERSION is required for neuron" in runs
    assert '[ "${installed}" = "${OPTIMUM_NEURON_VERSION}" ]' in runs


def test_neuron_image_resets_the_dlc_entrypoint_so_sigterm_reaches_the_service():
    # Defect 5: the Neuron DLC's ENTRYPOINT runs the command as a child of dockerd-entrypoint.py, which never
    # forwards SIGTERM. The service must be the container's main process.
    neuron = stages()["neuron"]
    (entrypoint,) = [rest for keyword, rest in neuron if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint) == []
    # A new ENTRYPOINT clears the inherited CMD, so the stage must set it again, after the ENTRYPOINT.
    assert [k for k, _ in neuron if k in ("ENTRYPOINT", "CMD")] == ["ENTRYPOINT", "CMD"]
    (cmd,) = [rest for keyword, rest in neuron if keyword == "CMD"]
    assert json.loads(cmd) == ["python", "-m", "app"]
    # The GPU DLC's entrypoint.sh execs the command (and sets up CUDA forward compatibility): kept.
    assert all(keyword not in ("ENTRYPOINT", "CMD") for keyword, _ in stages()["nvidia"])


def test_copies_only_the_service_its_locks_and_the_shared_runtime():
    copies = [rest for keyword, rest in instructions() if keyword == "COPY"]
    assert copies == ["app/requirements /srv/requirements", "common /srv/common", "app /srv/app"]


def test_runs_as_a_non_root_user_and_starts_the_service():
    parsed = instructions()
    users = [rest for keyword, rest in parsed if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_user = max(i for i, (keyword, _) in enumerate(parsed) if keyword == "USER")
    assert all(keyword != "RUN" for keyword, _ in parsed[last_user:])  # nothing runs as root after it
    assert ("EXPOSE", "8000") in parsed
    (cmd,) = [rest for keyword, rest in stages()["service"] if keyword == "CMD"]
    assert json.loads(cmd) == ["python", "-m", "app"]
    assert "MODEL_CACHE_DIR=/var/cache/sd-model" in DOCKERFILE.read_text()
