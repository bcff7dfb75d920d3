"""Pin a workload's pod to the instance it is priced at, and stop the synth when it would not fit there.

Every accelerated pod the stacks build (the image service per accelerator, the Neuron compile Job, the LLM
replicas) names one instance type (cdk/instance_types.py). Its price feeds the cost routing weights, the dashboards
and `python -m cdk.costs`, so the pod must run on exactly that type:
- a nodeSelector on the well-known `node.kubernetes.io/instance-type` label (Karpenter's instance-types.md lists
  it for each type, v1.14.1) makes Karpenter launch that type and no other of the NodePool's families. Karpenter
  left to itself would take the cheapest type that fits, which is a different price whenever the pool allows
  a cheaper family (g6 beside g5) or a pod outgrows the type by a little;
- the check below holds the pod's requests, with the platform's DaemonSets, against that type's allocatable
  (cdk/node_fit.py) and its devices, and names the settings to change where they do not fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cdk.accelerators import ACCELERATORS
from cdk.config.context import ConfigError
from cdk.instance_types import InstanceType
from cdk.node_fit import allocatable, daemonset_requests, pod_requests, shortfall

INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class FitSettings:
    """The pod, in words, and the context keys that size it: what a synth-time error tells the user to change."""

    pod: str  # "the LLM pod on neuron"
    instance_key: str
    cpu_key: str
    memory_key: str
    devices_key: str  # the setting that decides the accelerator devices the pod asks for


def device_requests(pod_spec: Mapping[str, Any], resource_name: str) -> int:
    """The accelerator devices (`resource_name`, e.g. aws.amazon.com/neuron) the pod's containers ask for."""
    return sum(
        int(c.get("resources", {}).get("requests", {}).get(resource_name, 0)) for c in pod_spec.get("containers", ())
    )


def pin_to_instance(pod_spec: Mapping[str, Any], instance: InstanceType) -> dict[str, Any]:
    """The pod spec with a nodeSelector on `instance`'s type beside its node pool's labels."""
    return {**pod_spec, "nodeSelector": {**pod_spec.get("nodeSelector", {}), INSTANCE_TYPE_LABEL: instance.name}}


def require_fit(pod_spec: Mapping[str, Any], instance: InstanceType, settings: FitSettings) -> None:
    """Stop the synth, naming the settings, when the pod plus the DaemonSets outgrow `instance` (CPU, memory or
    accelerator devices)."""
    devices = device_requests(pod_spec, ACCELERATORS[instance.accelerator].resource_name)
    if devices > instance.devices:
        raise ConfigError(
            f"{settings.pod} asks for {devices} accelerator devices, more than '{settings.instance_key}' = "
            f"{instance.name!r} has ({instance.devices}): lower '{settings.devices_key}', or pick a larger "
            f"'{settings.instance_key}'"
        )
    short = shortfall(pod_requests(pod_spec), instance)
    if not (short.cpu_m or short.memory_mib):
        return
    pod = pod_requests(pod_spec)
    daemons = daemonset_requests(instance.accelerator)
    room = allocatable(instance)
    over = []
    if short.cpu_m:
        over.append(f"'{settings.cpu_key}' by {short.cpu_m}m")
    if short.memory_mib:
        over.append(f"'{settings.memory_key}' by {short.memory_mib} MiB")
    raise ConfigError(
        f"{settings.pod} requests {pod.cpu_m}m CPU and {pod.memory_mib} MiB; with the platform's DaemonSets "
        f"({daemons.cpu_m}m, {daemons.memory_mib} MiB) that is more than '{settings.instance_key}' = "
        f"{instance.name!r} offers ({room.cpu_m}m, {room.memory_mib} MiB allocatable): lower "
        + " and ".join(over)
        + f", or pick a larger '{settings.instance_key}'"
    )


def pinned_and_fitting(pod_spec: Mapping[str, Any], instance: InstanceType, settings: FitSettings) -> dict[str, Any]:
    """`pin_to_instance`, after `require_fit`: what a workload calls on each pod it builds."""
    require_fit(pod_spec, instance, settings)
    return pin_to_instance(pod_spec, instance)
