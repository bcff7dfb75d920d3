"""The LLM workload's names and ports, shared by its manifests, the stack, scaling, routing and dashboards."""

from __future__ import annotations

from typing import Final

from cdk.accelerators import Accelerator

# One Deployment (and Service, metrics DeploymentUnit) per accelerator, beside the image service's sd-neuron/sd-gpu.
DEPLOYMENT_NAMES: Final = {"neuron": "llm-neuron", "nvidia": "llm-gpu"}
GATEWAY_PORT: Final = 8000  # the gateway's PORT: what the Service and the ALB reach
ENGINE_PORT: Final = 8001  # vLLM's OpenAI server on the loopback where it has no socket (the compile Job)
# On a serving pod vLLM listens on a Unix socket (`--uds`) in a small volume it shares with the gateway only: the
# gateway spends less CPU per token than over loopback TCP (docs/llm-serving.md has the figures), and nothing else
# in the pod's network namespace can reach the engine.
ENGINE_SOCKET_DIR: Final = "/run/engine"
ENGINE_SOCKET: Final = f"{ENGINE_SOCKET_DIR}/vllm.sock"
SERVICE_ACCOUNT_SUFFIX: Final = "-sa"


def deployment_name(acc: Accelerator) -> str:
    """The LLM Deployment, Service and metrics DeploymentUnit on `acc`."""
    return DEPLOYMENT_NAMES[acc.name]


# Where a pod holds the model. The Neuron compile Job uses the same weights path as the serving pods: the compiled
# artifacts record it (the model config's `_name_or_path`), and NxD Inference loads the weights from that path
# when a serving pod loads the artifacts (it shards on load; no sharded checkpoint is saved with them).
MODEL_ROOT: Final = "/models"
WEIGHTS_DIR: Final = f"{MODEL_ROOT}/weights"
