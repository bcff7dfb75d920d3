"""Session fixtures for the serving stack tests (see serving_fixture.py for the interface)."""

import pytest

from tests.cdk.serving_fixture import ServingSynth, serving_synth


@pytest.fixture(scope="session")
def serving() -> ServingSynth:
    """The default synth: both accelerators, cost routing."""
    return serving_synth("default")


@pytest.fixture(scope="session")
def serving_template(serving):
    """assertions.Template of the serving stack."""
    return serving.template


@pytest.fixture(scope="session")
def serving_manifests(serving):
    """Kubernetes objects (dicts) the serving stack applies, intrinsics substituted."""
    return serving.manifests


@pytest.fixture(scope="session")
def capacity_serving() -> ServingSynth:
    """The variant synth: capacity routing, NVIDIA only (Neuron disabled)."""
    return serving_synth("capacity")
