"""The instance-type settings every accelerated workload names (`llmInstanceType<Acc>`, `servingInstanceType<Acc>`,
`neuronCompileInstanceType`): a type of cdk/instance_types.py that the accelerator's nodes can be."""

from __future__ import annotations

from collections.abc import Sequence

from cdk.config.context import ConfigError, Context
from cdk.instance_types import INSTANCE_TYPES, InstanceType


def read_instance_type(
    ctx: Context, key: str, accelerator: str, families: Sequence[str] | None, node_types: Sequence[str] | None
) -> InstanceType:
    """The type `key` names. `families`: those `<accelerator>InstanceFamilies` allows (None: not checked);
    `node_types`: the only types managed node groups launch (None where Karpenter launches what pods select)."""
    known = sorted(t for t, it in INSTANCE_TYPES.items() if it.accelerator == accelerator)
    instance = INSTANCE_TYPES[ctx.string(key, allowed=known)]
    if families and instance.family not in families:
        raise ConfigError(
            f"setting '{key}' = {instance.name!r} is of family {instance.family}, which "
            f"'{accelerator}InstanceFamilies' ({', '.join(families)}) does not allow: add it there or pick another "
            f"'{key}'"
        )
    if node_types is not None and instance.name not in node_types:
        raise ConfigError(
            f"setting '{key}' = {instance.name!r} is not what the managed node group launches "
            f"({', '.join(node_types)}): set '{key}' to it, or use nodeProvisioner=karpenter"
        )
    return instance
