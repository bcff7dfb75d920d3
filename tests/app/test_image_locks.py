"""Each image's locked requirement set agrees with its input and with cdk/versions.py (offline)."""

from __future__ import annotations

import re
import shutil

import pytest

from cdk import versions
from tools import image_locks
from tools.image_locks import image_lock_specs, lock_problems, read_lock


@pytest.mark.parametrize("accelerator", sorted(versions.BASE_IMAGES))
def test_committed_lock_agrees_with_its_input_and_the_pins(accelerator):
    spec = image_lock_specs()[accelerator]
    assert lock_problems(spec) == [], "run `make lock` and commit app/requirements/*.lock"


def test_locks_are_resolved_for_the_base_images_named_in_versions():
    # The tags say which torch (and, for Neuron, which Python) the DLC holds; the locks are resolved for it.
    neuron_tag = versions.NEURON_BASE_IMAGE.rsplit(":", 1)[1]
    nvidia_tag = versions.NVIDIA_BASE_IMAGE.rsplit(":", 1)[1]
    assert neuron_tag.startswith(versions.BASE_IMAGE_TORCH["neuron"] + "-neuronx-")
    assert f"-py{versions.BASE_IMAGE_PYTHON['neuron'].replace('.', '')}-" in neuron_tag
    assert f"-sdk{versions.NEURON_SDK_VERSION}-" in neuron_tag
    assert nvidia_tag.startswith(versions.BASE_IMAGE_TORCH["nvidia"] + "-")


def test_neuron_lock_holds_the_line_optimum_neuron_pins():
    pins = read_lock(image_lock_specs()["neuron"].lock_file).pins
    assert str(pins["optimum-neuron"]) == versions.OPTIMUM_NEURON_VERSION
    # optimum-neuron 0.4.5's wheel METADATA: transformers~=4.57.1, extra diffusers: diffusers==0.35.*
    assert pins["transformers"].release[:2] == (4, 57)
    assert pins["diffusers"].release[:2] == (0, 35)
    assert "torch" not in pins and "torch-neuronx" not in pins


@pytest.fixture
def lock_tree(tmp_path, monkeypatch):
    """A copy of the requirement files the locks read, for breaking one on purpose."""
    (tmp_path / "app").mkdir()
    shutil.copytree(image_locks.REQUIREMENTS_DIR, tmp_path / "app" / "requirements")
    for path in image_locks.REPO_ROOT.glob("requirements*.txt"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(image_locks, "REQUIREMENTS_DIR", tmp_path / "app" / "requirements")
    return tmp_path


def test_a_bumped_optimum_neuron_pin_fails_until_relocked(lock_tree, monkeypatch):
    monkeypatch.setattr(versions, "OPTIMUM_NEURON_VERSION", "0.4.6")
    problems = lock_problems(image_lock_specs()["neuron"])
    assert any("optimum-neuron==0.4.5, which does not satisfy optimum-neuron==0.4.6" in p for p in problems)


def test_a_new_base_image_python_fails_until_relocked(lock_tree, monkeypatch):
    monkeypatch.setitem(versions.BASE_IMAGE_PYTHON, "nvidia", "3.13")
    problems = lock_problems(image_lock_specs()["nvidia"])
    assert problems == ["nvidia.lock header says python-version: '3.12', cdk/versions.py says '3.13'"]


def test_an_edited_input_fails_until_relocked(lock_tree):
    requirements = lock_tree / "requirements.txt"
    requirements.write_text(requirements.read_text().replace("fastapi==", "fastapi>=99,<100 #") + "brand-new==1.0\n")
    for name in ("neuron", "nvidia"):
        problems = lock_problems(image_lock_specs()[name])
        assert any(re.search(r"pins fastapi==[\d.]+, which does not satisfy fastapi<100,>=99", p) for p in problems)
        assert any("no pin for brand-new==1.0" in p for p in problems)


def test_torch_in_a_lock_is_refused(lock_tree):
    lock = image_locks.REQUIREMENTS_DIR / "neuron.lock"
    lock.write_text(lock.read_text() + "torch==2.8.0\n")
    assert lock_problems(image_lock_specs()["neuron"]) == [
        "neuron.lock pins torch, which the base image provides (its own build must stay)"
    ]
