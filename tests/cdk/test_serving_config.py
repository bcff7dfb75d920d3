"""ServingConfig: cdk.json's values are read as shipped, bad values name their key."""

import re

import pytest

from cdk.config.context import ConfigError
from cdk.config.serving import ServingConfig
from tests.cdk.conftest import DEFAULT_CONTEXT


def test_cdk_json_gives_the_documented_defaults():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    assert cfg.routing_mode == DEFAULT_CONTEXT["routingMode"]
    # No price in cdk.json: each pod is priced at the instance it is pinned to (Karpenter's us-east-1 table).
    neuron = cfg.per_accelerator["neuron"]
    assert (neuron.instance.name, neuron.price_per_hour) == (DEFAULT_CONTEXT["servingInstanceTypeNeuron"], 0.7582)
    assert cfg.termination_grace_s == cfg.pre_stop_s + cfg.shutdown_grace_s + 5


def test_command_line_strings_are_accepted():
    cfg = ServingConfig.from_context(
        DEFAULT_CONTEXT
        | {"routingWeightNeuron": "10", "routingWeightNvidia": "90", "ingressAllowedCidrs": "10.0.0.0/8"}
    )
    assert cfg.per_accelerator["nvidia"].routing_weight == 90
    assert cfg.allowed_cidrs == ("10.0.0.0/8",)


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"routingMode": "random"}, "routingMode"),
        ({"routingPeriodSeconds": 1}, "routingPeriodSeconds"),
        ({"routingHoldSeconds": "soon"}, "routingHoldSeconds"),
        ({"routingPeriodSeconds": 60, "routingHoldSeconds": 30}, "routingHoldSeconds"),
        ({"routingBandPods": -1}, "routingBandPods"),
        ({"routingZeroWeightAlarmMinutes": 0}, "routingZeroWeightAlarmMinutes"),
        ({"routingWeightNeuron": 5}, "routingWeightNvidia"),
        ({"routingWeightNeuron": 1000, "routingWeightNvidia": 1}, "routingWeightNeuron"),
        ({"scalingMinReplicasNvidia": 5, "scalingMaxReplicasNvidia": 2}, "scalingMaxReplicasNvidia"),
        ({"ingressIdleTimeoutSeconds": 30}, "ingressIdleTimeoutSeconds"),
        ({"ingressDeregistrationDelaySeconds": 600}, "ingressDeregistrationDelaySeconds"),
        ({"ingressCertificateArn": "not-an-arn"}, "ingressCertificateArn"),
        ({"ingressAllowedCidrs": ["10.0.0.1/8"]}, "ingressAllowedCidrs"),
        ({"neuronCompileHeight": 512}, "neuronCompileShapes"),
        ({"neuronCompileShapes": ["1024x500"]}, "neuronCompileShapes"),
        ({"neuronCompileTensorParallelSize": 3}, "neuronCompileTensorParallelSize"),
        ({"neuronCompileTensorParallelSize": 8}, "servingNeuronDevices"),
        ({"servingModelId": "a/b/c"}, "servingModelId"),
        ({"servingModelRevision": "main branch"}, "servingModelRevision"),
        ({"servingModelRevision": "../../etc"}, "servingModelRevision"),
        ({"costSecondsPerImageNvidia": 0}, "costSecondsPerImageNvidia"),
    ],
)
def test_bad_values_name_their_key(values, key):
    with pytest.raises(ConfigError, match=key):
        ServingConfig.from_context(DEFAULT_CONTEXT | values)


def test_the_default_model_is_pinned_to_one_commit_and_an_empty_revision_means_main():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    assert re.fullmatch(r"[0-9a-f]{40}", cfg.model_revision or "")
    assert ServingConfig.from_context(DEFAULT_CONTEXT | {"servingModelRevision": ""}).model_revision is None


def test_weights_are_staged_from_the_hub_unless_they_are_brought():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    assert cfg.stages_weights and cfg.hub_token_secret is None
    brought = ServingConfig.from_context(DEFAULT_CONTEXT | {"servingModelId": "s3://my-weights/sd21/"})
    assert not brought.stages_weights
    assert not ServingConfig.from_context(DEFAULT_CONTEXT | {"servingStageWeights": "false"}).stages_weights
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf"
    assert ServingConfig.from_context(DEFAULT_CONTEXT | {"servingHubTokenSecretName": arn}).hub_token_secret == arn


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"servingHubTokenSecretName": "hf_abcdefghijklmnopqrstuvwxyz"}, "servingHubTokenSecretName"),
        ({"servingHubTokenSecretName": "my token"}, "servingHubTokenSecretName"),
        ({"servingModelId": "s3://bucket-only"}, "servingModelId"),
        ({"neuronCompileMemoryGi": 12}, "neuronCompileMemoryGi"),
        ({"servingStageWeights": "maybe"}, "servingStageWeights"),
    ],
)
def test_bad_staging_and_compile_values_name_their_key(values, key):
    with pytest.raises(ConfigError, match=key):
        ServingConfig.from_context(DEFAULT_CONTEXT | values)


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"servingModelSizeGi": 0}, "servingModelSizeGi"),
        ({"servingModelSizeGi": 41}, "servingCacheSizeGi"),
        ({"neuronCompileScratchGi": 24}, "neuronCompileScratchGi"),  # 5 GiB model: 5 copies, 25 GiB
        ({"servingModelSizeGi": 9}, "neuronCompileScratchGi"),
    ],
)
def test_volumes_too_small_for_the_model_name_their_key(values, key):
    with pytest.raises(ConfigError, match=key):
        ServingConfig.from_context(DEFAULT_CONTEXT | values)


def test_the_compile_scratch_is_not_read_without_neuron():
    values = {k: v for k, v in DEFAULT_CONTEXT.items() if k != "neuronCompileScratchGi"}
    assert ServingConfig.from_context(values, accelerators=["nvidia"]).neuron_compile is None
