"""A profile is a set of context defaults: it replaces cdk.json's values, and a key the user gives wins."""

from __future__ import annotations

import pytest

from cdk.config import AppConfig, ConfigError
from cdk.config.profiles import TRIAL, apply_profile
from tests.cdk.conftest import DEFAULT_CONTEXT, EXAMPLE_ENVIRONMENT


def config(context: dict[str, object]) -> AppConfig:
    return AppConfig.from_context(apply_profile({**context, **EXAMPLE_ENVIRONMENT}, DEFAULT_CONTEXT), {})


def test_the_trial_profile_replaces_cdk_json_values() -> None:
    cfg = config({**DEFAULT_CONTEXT, "profile": "trial"})
    assert [a.name for a in cfg.accelerators] == ["nvidia"]
    assert cfg.llm is None
    assert cfg.system_instance_type == TRIAL["systemInstanceType"]
    assert cfg.serving.per_accelerator["nvidia"].min_replicas == 0
    assert cfg.serving.starting_gate
    assert cfg.observability.control_plane_log_types == ("api", "audit", "authenticator")


def test_a_key_given_on_the_command_line_wins_over_the_profile() -> None:
    cfg = config(
        {**DEFAULT_CONTEXT, "profile": "trial", "systemInstanceType": "t3.large", "scalingMinReplicasNvidia": "1"}
    )
    assert cfg.system_instance_type == "t3.large"
    assert cfg.serving.per_accelerator["nvidia"].min_replicas == 1
    assert [a.name for a in cfg.accelerators] == ["nvidia"]  # the rest of the profile still applies


def test_without_a_profile_the_context_is_unchanged() -> None:
    assert apply_profile(DEFAULT_CONTEXT, DEFAULT_CONTEXT) == DEFAULT_CONTEXT


def test_an_unknown_profile_is_named() -> None:
    with pytest.raises(ConfigError, match="setting 'profile' = 'cheap' is invalid: expected one of trial"):
        apply_profile({**DEFAULT_CONTEXT, "profile": "cheap"}, DEFAULT_CONTEXT)


def test_control_plane_logging_keeps_what_an_incident_review_needs() -> None:
    with pytest.raises(ConfigError, match=r"'controlPlaneLogTypes'.*must keep api, audit, authenticator"):
        config({**DEFAULT_CONTEXT, "controlPlaneLogTypes": "api,scheduler"})


def test_an_interactive_pool_at_zero_needs_the_starting_gate() -> None:
    with pytest.raises(ConfigError, match="'servingStartingGate' = true"):
        config({**DEFAULT_CONTEXT, "profile": "trial", "servingStartingGate": "false"})


def test_the_starting_gate_fronts_one_accelerator() -> None:
    with pytest.raises(ConfigError, match="'servingStartingGate' = true needs exactly one accelerator"):
        config({**DEFAULT_CONTEXT, "servingStartingGate": "true"})


def test_the_trial_with_flux_names_its_instance_and_its_longer_cold_start() -> None:
    from cdk.build import resolve_context
    from cdk.cold_start import first_image_minutes
    from cdk.image import starting_gate
    from cdk.image.presets import FLUX_SCHNELL, SD21_BASE

    context = {**DEFAULT_CONTEXT, **EXAMPLE_ENVIRONMENT, "profile": "trial"}
    flux = {"imageModel": "flux-schnell", "servingHubTokenSecretName": "sd/hub-token"}
    trial = AppConfig.from_context(resolve_context(context), {})
    with_flux = AppConfig.from_context(resolve_context({**context, **flux}), {})
    # The pod is pinned to the preset's instance (an L40S: the L4 of the default is too small), within the trial's
    # one 4-vCPU node.
    assert with_flux.serving.per_accelerator["nvidia"].instance.name == FLUX_SCHNELL.nvidia.instance.name
    assert FLUX_SCHNELL.nvidia.instance.vcpu <= TRIAL["nvidiaMaxVcpu"]
    # Six times the weights take longer to load: the gate says so.
    assert with_flux.serving.model_size_gi == FLUX_SCHNELL.size_gi.value > SD21_BASE.size_gi.value
    minutes = {
        e["name"]: e["value"]
        for e in starting_gate.environment(with_flux.accelerators[0], with_flux.serving, "us-east-1")
    }["STARTING_MINUTES"]
    assert int(minutes) == first_image_minutes(FLUX_SCHNELL.size_gi.value)[1] > first_image_minutes()[1]
    assert trial.serving.model_size_gi == SD21_BASE.size_gi.value


def test_the_trial_doc_states_flux_instance_price_and_cold_start() -> None:
    from pathlib import Path

    from cdk.cold_start import first_image_minutes
    from cdk.image.presets import FLUX2_KLEIN_4B, FLUX_SCHNELL

    doc = (Path(__file__).resolve().parents[2] / "docs" / "trial.md").read_text()
    instance = FLUX_SCHNELL.nvidia.instance
    assert f"a {instance.name}" in doc and f"${instance.usd_per_hour:.3f} an hour" in doc
    low, high = first_image_minutes(FLUX_SCHNELL.size_gi.value)
    assert f"about {low}-{high}\nminutes from cold" in doc or f"about {low}-{high} minutes from cold" in doc
    klein_low, klein_high = first_image_minutes(FLUX2_KLEIN_4B.size_gi.value)
    assert f"{klein_low}-{klein_high})" in doc
