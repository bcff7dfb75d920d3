"""The LLM catalog: each preset builds with its own shape on the instance it names, priced at that instance; no synth
(tests/cdk/test_llm_serving.py synthesizes the default). That each preset's pod is pinned to that instance and fits
there beside the DaemonSets is the shared fit check's test, tests/cdk/test_pod_fit.py, for every workload."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cdk.accelerators import ACCELERATORS
from cdk.config.context import ConfigError
from cdk.config.llm import LlmConfig, preset_keys
from cdk.instance_types import INSTANCE_TYPES
from cdk.llm.presets import PRESETS, LlmPreset
from tests.cdk.conftest import DEFAULT_CONTEXT

ON = DEFAULT_CONTEXT | {"llmEnabled": True}
FAMILIES = {"neuron": ["inf2"], "nvidia": ["g5", "g6"]}
TOKEN = {"servingHubTokenSecretName": "sd/hub-token"}


def settings_for(preset: LlmPreset, **extra: Any) -> dict[str, Any]:
    return {"llmModel": preset.name, **(TOKEN if preset.gated.value else {}), **extra}


@pytest.mark.parametrize("preset", PRESETS.values(), ids=lambda p: p.name)
@pytest.mark.parametrize("key", ["llmModel", "llmModelId"])
def test_each_preset_configures_its_own_shape(preset, key):
    chosen = preset.name if key == "llmModel" else preset.model_id.value
    values = ON | settings_for(preset) | {"llmModel": ""} | {key: chosen}
    cfg = LlmConfig.from_context(values, instance_families=FAMILIES)
    assert cfg is not None and cfg.preset == preset.name
    assert (cfg.model_id, cfg.served_model_name) == (preset.model_id.value, preset.name)
    assert (cfg.attention_heads, cfg.kv_heads, cfg.model_size_gi) == (
        preset.attention_heads.value,
        preset.kv_heads.value,
        preset.size_gi.value,
    )
    for name, fit in preset.per_accelerator.items():
        per = cfg.per_accelerator[name]
        assert (per.instance.name, per.tensor_parallel, per.cpu, per.memory_gi) == (
            fit.instance_type,
            fit.tensor_parallel,
            fit.cpu,
            fit.memory_gi,
        )
        # The routing weights, the dashboard and the benchmark Job all read this price.
        assert per.price_per_hour == INSTANCE_TYPES[fit.instance_type].usd_per_hour


def test_a_model_outside_the_catalog_names_every_missing_setting():
    with pytest.raises(ConfigError) as error:
        LlmConfig.from_context(ON | {"llmModelId": "example-org/example-7b"}, instance_families=FAMILIES)
    text = str(error.value)
    assert "'llmModelId' = 'example-org/example-7b' is not in the LLM catalog" in text
    missing = text.split("missing ", 1)[1]
    for key in preset_keys(list(ACCELERATORS)):
        assert (f"'{key}'" in missing) is (key != "llmModelId"), key


def test_a_model_outside_the_catalog_with_its_facts_synthesizes_its_own_shape():
    facts = {
        "llmModelId": "example-org/example-7b",
        "llmServedModelName": "example-7b",
        "llmModelAttentionHeads": 32,
        "llmModelKvHeads": 8,
        "llmModelSizeGi": 16,
        "llmToolCallParser": "none",
        "llmMaxModelLen": 4096,
        "llmMaxNumSeqs": 8,
        "llmInstanceTypeNeuron": "inf2.8xlarge",
        "llmTensorParallelNeuron": 2,
        "llmCpuNeuron": 8,
        "llmMemoryGiNeuron": 64,
        "llmInstanceTypeNvidia": "g5.2xlarge",
        "llmTensorParallelNvidia": 1,
        "llmCpuNvidia": 6,
        "llmMemoryGiNvidia": 24,
    }
    cfg = LlmConfig.from_context(ON | facts, instance_families=FAMILIES)
    assert cfg is not None and cfg.preset is None and cfg.kv_heads == 8
    assert cfg.tool_call_parser is None  # "none": no auto tool choice
    assert cfg.per_accelerator["nvidia"].price_per_hour == 1.212  # g5.2xlarge, Karpenter's us-east-1 table


def test_explicit_settings_override_a_presets_facts():
    values = ON | {"llmModel": "qwen2.5-7b-instruct", "llmPricePerHourNvidia": 0.4}
    cfg = LlmConfig.from_context(values, instance_families=FAMILIES)
    assert cfg is not None and cfg.per_accelerator["nvidia"].price_per_hour == 0.4
    assert cfg.per_accelerator["neuron"].price_per_hour == INSTANCE_TYPES["inf2.8xlarge"].usd_per_hour


@pytest.mark.parametrize(
    ("values", "families", "message"),
    [
        (
            {"llmModel": "llama-3.1-8b-instruct"},
            FAMILIES,
            "'servingHubTokenSecretName' is required by the LLM preset 'llama-3.1-8b-instruct'",
        ),
        ({"llmModel": "gpt-4"}, FAMILIES, "'llmModel' = 'gpt-4' is invalid: expected one of qwen2.5-1.5b-instruct"),
        (
            {"llmModel": "qwen2.5-7b-instruct", "llmModelId": "Qwen/Qwen2.5-1.5B-Instruct"},
            FAMILIES,
            "name two catalog models",
        ),
        ({}, {"neuron": ["inf2"], "nvidia": ["g5"]}, "'llmInstanceTypeNvidia' = 'g6.xlarge' is of family g6"),
        ({"llmInstanceTypeNvidia": "inf2.xlarge"}, FAMILIES, "'llmInstanceTypeNvidia' = 'inf2.xlarge' is invalid"),
        ({"llmTensorParallelNvidia": 2}, FAMILIES, "needs 2 GPUs, more than 'llmInstanceTypeNvidia' = 'g6.xlarge'"),
    ],
)
def test_a_preset_that_cannot_run_as_set_names_the_setting(values, families, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        LlmConfig.from_context(ON | values, instance_families=families)


def test_managed_node_groups_must_launch_the_presets_instance():
    message = "'llmInstanceTypeNvidia' = 'g6.xlarge' is not what the managed node group"
    with pytest.raises(ConfigError, match=re.escape(message)):
        LlmConfig.from_context(
            ON, instance_families=FAMILIES, node_instance_types={"neuron": ["inf2.xlarge"], "nvidia": ["g5.xlarge"]}
        )


def test_every_fact_names_its_source_and_the_neuron_support_level_is_one_of_two():
    for preset in PRESETS.values():
        for fact in (preset.model_id, preset.licence, preset.gated, preset.attention_heads, preset.kv_heads):
            assert fact.source.strip()
        assert preset.neuron_support.value in ("tested", "expected to work")
        assert preset.attention_heads.value % preset.kv_heads.value == 0
