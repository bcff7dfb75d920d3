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
