"""LlmConfig: off unless `llmEnabled`; on, cdk.json's values are read as shipped and a degree that cannot shard
the model, or a replica no instance can hold, stops the synth naming the setting."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cdk import versions
from cdk.config.context import ConfigError
from cdk.config.llm import TTFT_ALARM_KEY, LlmConfig
from tests.cdk.conftest import DEFAULT_CONTEXT, EXAMPLE_ENVIRONMENT, REPO_ROOT
from tests.support.pinned_node import NODE_BIN

ON = DEFAULT_CONTEXT | {"llmEnabled": True}
FAMILIES = {"neuron": ["inf2"], "nvidia": ["g5", "g6"]}


def test_off_by_default_and_then_no_llm_key_is_read():
    assert DEFAULT_CONTEXT["llmEnabled"] is False
    without_llm_keys = {
        key: value for key, value in DEFAULT_CONTEXT.items() if not key.startswith("llm") and key != TTFT_ALARM_KEY
    }
    assert LlmConfig.from_context(without_llm_keys) is None
    assert LlmConfig.from_context(DEFAULT_CONTEXT | {TTFT_ALARM_KEY: "soon"}) is None
    assert LlmConfig.from_context(DEFAULT_CONTEXT | {"llmMaxNumSeqs": "many"}) is None


def test_the_shipped_values_serve_the_verified_default_model_on_both_accelerators():
    cfg = LlmConfig.from_context(ON, instance_families=FAMILIES)
    assert cfg is not None
    assert cfg.model_id == versions.LLM_DEFAULT_MODEL_ID
    assert cfg.preset == "qwen2.5-1.5b-instruct"
    assert cfg.accelerators == ("neuron", "nvidia")
    neuron, nvidia = cfg.per_accelerator["neuron"], cfg.per_accelerator["nvidia"]
    # Two NeuronCores are one Inferentia2 chip (an inf2.xlarge); one GPU is one g6.xlarge.
    assert (neuron.tensor_parallel, neuron.devices) == (2, 1)
    assert (nvidia.tensor_parallel, nvidia.devices) == (1, 1)


def test_the_switch_takes_the_command_lines_string():
    assert LlmConfig.from_context(DEFAULT_CONTEXT | {"llmEnabled": "true"}) is not None
    with pytest.raises(ConfigError, match="'llmEnabled' = 'yes' is invalid: expected true or false"):
        LlmConfig.from_context(DEFAULT_CONTEXT | {"llmEnabled": "yes"})


def test_an_inf2_replica_takes_one_chip_per_two_neuron_cores():
    values = ON | {"llmTensorParallelNeuron": 6, "llmInstanceTypeNeuron": "inf2.24xlarge"}
    cfg = LlmConfig.from_context(values, instance_families=FAMILIES)
    assert cfg is not None and cfg.per_accelerator["neuron"].devices == 3


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"llmTensorParallelNeuron": 8}, "'llmTensorParallelNeuron' = 8 does not divide 'llmModelAttentionHeads' = 12"),
        ({"llmTensorParallelNvidia": 5}, "'llmTensorParallelNvidia' = 5 does not divide"),
        (
            {"llmModelAttentionHeads": 24, "llmModelKvHeads": 8, "llmTensorParallelNvidia": 6},
            "'llmTensorParallelNvidia' = 6 neither divides nor is a multiple of 'llmModelKvHeads' = 8",
        ),
        ({"llmModelKvHeads": 5}, "'llmModelKvHeads' = 5 does not divide 'llmModelAttentionHeads' = 12"),
        (
            {"llmModelAttentionHeads": 64, "llmModelKvHeads": 8, "llmTensorParallelNeuron": 32},
            "'llmTensorParallelNeuron' = 32 needs 16 Neuron chips per replica, more than the largest instance of "
            "'neuronInstanceFamilies' \\(inf2\\) has \\(12\\)",
        ),
        (
            {"llmModelAttentionHeads": 64, "llmModelKvHeads": 8, "llmTensorParallelNvidia": 16},
            "needs 16 GPUs per replica, more than the largest instance of 'nvidiaInstanceFamilies' \\(g5, g6\\) has",
        ),
        ({"llmMinReplicasNvidia": 3, "llmMaxReplicasNvidia": 2}, "'llmMaxReplicasNvidia' = 2 is below"),
        ({"llmMinReplicasNeuron": 0}, "'llmMinReplicasNeuron' = 0 is invalid"),
        ({"llmGatewayMaxConcurrentRequests": 4}, "'llmGatewayMaxConcurrentRequests' = 4 is below 'llmMaxNumSeqs' = 8"),
        (
            {"llmModel": "qwen2.5-1.5b-instruct", "llmModelId": "not a hub id"},
            "'llmModelId' = 'not a hub id' is invalid",
        ),
        ({"llmModelRevision": "../main"}, "'llmModelRevision'"),
        ({"llmServedModelName": "has space"}, "'llmServedModelName'"),
        ({"llmMaxModelLen": 64}, "'llmMaxModelLen' = 64 is invalid"),
        (
            {"llmMaxModelLen": 2048},
            "settings 'llmBenchmarkInputTokens' \\+ 'llmBenchmarkOutputTokens' = 3584 exceed 'llmMaxModelLen' = 2048",
        ),
        ({"llmBenchmarkOutputTokens": 1}, "'llmBenchmarkOutputTokens' = 1 is invalid"),
        ({"llmBenchmarkTimeoutSeconds": 60}, "'llmBenchmarkTimeoutSeconds' = 60 is invalid"),
        ({"alarmTtftP90Ms": 0}, "'alarmTtftP90Ms' = 0.0 is invalid: expected a value of at least 1"),
        ({"alarmTtftP90Ms": "soon"}, "'alarmTtftP90Ms' = 'soon' is invalid: expected a finite number"),
    ],
)
def test_bad_values_name_their_setting(values, message):
    with pytest.raises(ConfigError, match=message):
        LlmConfig.from_context(ON | values, instance_families=FAMILIES)


def test_a_neuron_family_without_a_vllm_image_line_is_named():
    with pytest.raises(ConfigError, match="'neuronInstanceFamilies' includes trn1: LLM serving on Neuron runs on inf2"):
        LlmConfig.from_context(ON, instance_families={"neuron": ["inf2", "trn1"], "nvidia": ["g6"]})


def test_a_disabled_accelerators_llm_settings_are_not_required():
    values = {key: value for key, value in ON.items() if not key.endswith("Neuron")}
    cfg = LlmConfig.from_context(values, accelerators=["nvidia"], instance_families={"nvidia": ["g6"]})
    assert cfg is not None and cfg.accelerators == ("nvidia",)


@pytest.mark.synth  # runs the CDK app (python app.py), through no fixture
@pytest.mark.parametrize(
    ("values", "last_line"),
    [
        (
            {"llmTensorParallelNeuron": 5},
            "configuration error: setting 'llmTensorParallelNeuron' = 5 does not divide 'llmModelAttentionHeads' = 12: "
            "each NeuronCore or GPU must hold whole attention heads",
        ),
        # Found while building the stacks: the pod is checked as built, against its instance.
        (
            {"llmCpuNeuron": 3},
            "configuration error: the LLM pod on neuron requests 3250m CPU and 12544 MiB; with the platform's "
            "DaemonSets (731m, 311 MiB) that is more than 'llmInstanceTypeNeuron' = 'inf2.xlarge' offers (3920m, "
            "14162 MiB allocatable): lower 'llmCpuNeuron' by 61m, or pick a larger 'llmInstanceTypeNeuron'",
        ),
    ],
    ids=["config", "pod-fit"],
)
def test_the_app_stops_with_one_line_naming_the_setting(values, last_line):
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={
            "PATH": f"{NODE_BIN}:/usr/bin:/bin",  # the pinned Node, as `make` provides it
            "CDK_CONTEXT_JSON": json.dumps(ON | EXAMPLE_ENVIRONMENT | values),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == last_line
