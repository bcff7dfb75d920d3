"""cdk/config/pool_capacity.py through the app's own config path (profile and image preset applied as `cdk synth`
applies them): a maximum its pool's limit cannot hold stops the synth naming the settings, and a pool with no room
for one more node at its maximum rolls its Deployments without surge."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cdk.accelerators import ACCELERATORS
from cdk.build import project_defaults, resolve_context
from cdk.config import AppConfig, ConfigError
from cdk.image import workload as image_workload
from cdk.llm import workload as llm_workload
from tests.cdk.conftest import EXAMPLE_ENVIRONMENT

SURGE = {"maxSurge": 1, "maxUnavailable": 0}
IN_PLACE = {"maxSurge": 0, "maxUnavailable": 1}
# A managed node group takes one capacity type.
ONE_CAPACITY_TYPE = {"neuronCapacityTypes": "on-demand", "nvidiaCapacityTypes": "on-demand"}


def config(**given: Any) -> AppConfig:
    """The AppConfig `cdk synth -c key=value ...` reads."""
    return AppConfig.from_context(resolve_context({**project_defaults(), **EXAMPLE_ENVIRONMENT, **given}), {})


def image_strategy(cfg: AppConfig, acc: str) -> dict[str, Any]:
    made = image_workload.deployment(
        ACCELERATORS[acc], cfg.serving, image="registry/sd:x", model_uri="s3://b/p/", region="us-east-1"
    )
    assert made["spec"]["strategy"]["type"] == "RollingUpdate"
    return dict(made["spec"]["strategy"]["rollingUpdate"])


def test_the_trials_one_node_pool_rolls_in_place():
    # 1 x g6.xlarge (4 vCPU) fills nvidiaMaxVcpu = 4: a surge pod would wait for a node Karpenter may not launch.
    assert image_strategy(config(profile="trial"), "nvidia") == IN_PLACE


def test_pools_with_room_for_one_more_node_surge():
    cfg = config()
    assert cfg.serving.pool_rooms["neuron"].vcpu == 192 - 4 * 4
    assert image_strategy(cfg, "neuron") == SURGE
    assert image_strategy(cfg, "nvidia") == SURGE
    # Flux on Neuron: one 96-vCPU pod leaves room for exactly one more of its nodes.
    assert (
        image_strategy(config(imageModel="flux-schnell", servingHubTokenSecretName="sd/hub-token"), "neuron") == SURGE
    )


def test_a_pool_filled_by_its_maxima_rolls_the_llm_in_place_too():
    cfg = config(llmEnabled=True, nvidiaMaxVcpu=24)  # 4 x g6.xlarge image pods + 2 x the LLM's 4-vCPU nodes
    assert cfg.serving.pool_rooms["nvidia"].vcpu == 0 and cfg.llm is not None
    assert image_strategy(cfg, "nvidia") == IN_PLACE
    made = llm_workload.deployment(
        ACCELERATORS["nvidia"],
        cfg.llm,
        cfg.serving,
        gateway_image="registry/gw:x",
        vllm_image="registry/vllm:x",
        bucket="b",
        weights_prefix="models/x/",
        artifacts_prefix=None,
        region="us-east-1",
        env_config_maps=["sd-auth"],
    )
    assert made["spec"]["strategy"]["rollingUpdate"] == IN_PLACE


def test_the_flux_presets_neuron_maximum_fits_the_default_limit():
    cfg = config(imageModel="flux-schnell", servingHubTokenSecretName="sd/hub-token")
    neuron = cfg.serving.per_accelerator["neuron"]
    assert neuron.max_replicas * neuron.instance.vcpu <= cfg.capacity_for("neuron").max_vcpu


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"imageModel": "flux-schnell", "servingHubTokenSecretName": "sd/hub-token", "scalingMaxReplicasNeuron": 3},
            "the neuron pool's maximum replicas need 288 vCPU ('scalingMaxReplicasNeuron' = 3 x "
            "'servingInstanceTypeNeuron' = 'inf2.24xlarge' (96 vCPU)), more than 'neuronMaxVcpu' = 192 lets "
            "Karpenter launch: lower the maximum replicas or raise 'neuronMaxVcpu' to 288",
        ),
        (
            {"profile": "trial", "scalingMaxReplicasNvidia": 2},
            "the nvidia pool's maximum replicas need 8 vCPU ('scalingMaxReplicasNvidia' = 2 x "
            "'servingInstanceTypeNvidia' = 'g6.xlarge' (4 vCPU)), more than 'nvidiaMaxVcpu' = 4",
        ),
        (
            {"llmEnabled": True, "nvidiaMaxVcpu": 20},
            "'scalingMaxReplicasNvidia' = 4 x 'servingInstanceTypeNvidia' = 'g6.xlarge' (4 vCPU) + "
            "'llmMaxReplicasNvidia' = 2 x 'llmInstanceTypeNvidia'",
        ),
        (
            {"nodeProvisioner": "managed", **ONE_CAPACITY_TYPE, "nvidiaMaxNodes": 3},
            "the nvidia pool's maximum replicas need 4 nodes ('scalingMaxReplicasNvidia' = 4 x "
            "'servingInstanceTypeNvidia' = 'g6.xlarge' (4 vCPU)), more than 'nvidiaMaxNodes' = 3",
        ),
    ],
    ids=["flux-neuron", "trial", "with-llm", "managed-nodes"],
)
def test_a_maximum_the_pool_cannot_hold_stops_the_synth_naming_the_settings(given, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config(**given)
