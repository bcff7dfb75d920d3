"""The synth-time check that one LLM pod and the platform's DaemonSets fit the instance it is priced at.

Without it a pod a little too large makes Karpenter launch the next size up: the deploy works, and every cost
figure (routing weights, cost per million tokens, the benchmark's cost column, the at-rest cost) is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cdk.config.context import ConfigError
from cdk.config.llm import LlmAccelerator
from cdk.node_fit import allocatable, daemonset_requests, pod_requests, shortfall

# The well-known label every node carries (Karpenter's instance-types.md lists it for each type, v1.14.1): a
# nodeSelector on it makes Karpenter launch exactly the type the replica is priced at.
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"


def require_fit(per: LlmAccelerator, pod_spec: Mapping[str, Any]) -> None:
    """Stop the synth, naming the settings, when the pod plus the DaemonSets outgrow `llmInstanceType<Acc>`."""
    short = shortfall(pod_requests(pod_spec), per.instance)
    if not (short.cpu_m or short.memory_mib):
        return
    suffix = per.accelerator[0].upper() + per.accelerator[1:]
    pod = pod_requests(pod_spec)
    daemons = daemonset_requests(per.accelerator)
    room = allocatable(per.instance)
    over = []
    if short.cpu_m:
        over.append(f"'llmCpu{suffix}' by {short.cpu_m}m")
    if short.memory_mib:
        over.append(f"'llmMemoryGi{suffix}' by {short.memory_mib} MiB")
    raise ConfigError(
        f"the LLM pod on {per.accelerator} requests {pod.cpu_m}m CPU and {pod.memory_mib} MiB; with the platform's "
        f"DaemonSets ({daemons.cpu_m}m, {daemons.memory_mib} MiB) that is more than 'llmInstanceType{suffix}' = "
        f"{per.instance.name!r} offers ({room.cpu_m}m, {room.memory_mib} MiB allocatable): lower "
        + " and ".join(over)
        + f", or pick a larger 'llmInstanceType{suffix}'"
    )
