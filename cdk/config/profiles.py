"""Deploy profiles: named sets of context defaults applied before the typed config reads the context.

`-c profile=trial` replaces cdk.json's values with the profile's; any key given another value than
cdk.json's (by `-c key=value` or cdk.context.json) is the user's and wins over the profile. The CDK CLI
hands the app one merged context, so "another value than cdk.json's" is the only sign of an explicit key
left: `-c key=<cdk.json's value>` cannot be told apart and takes the profile's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cdk.config.context import ConfigError

PROFILE_KEY: Final = "profile"

# The cheapest way to try the stack (docs/trial.md): one accelerator (NVIDIA: no compile Job), Spot first, no
# LLM, two burstable system nodes, trimmed logging, and no accelerated pod at rest: the pool scales from zero
# behind the starting gate, to at most one node.
TRIAL: Final[Mapping[str, Any]] = {
    "accelerators": ["nvidia"],
    "nvidiaCapacityTypes": ["spot", "on-demand"],
    "nvidiaMaxVcpu": 4,
    "nvidiaMaxNodes": 1,
    "llmEnabled": False,
    "systemInstanceType": "t3.medium",
    "systemNodeCount": 2,
    "scalingMinReplicasNvidia": 0,
    "scalingMaxReplicasNvidia": 1,
    "servingStartingGate": True,
    "controlPlaneLogTypes": ["api", "audit", "authenticator"],
    "flowLogTraffic": "REJECT",
    "containerInsightsContainerLogs": False,
}

PROFILES: Final[Mapping[str, Mapping[str, Any]]] = {"trial": TRIAL}


def apply_profile(context: Mapping[str, Any], project_defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The context with the named profile's values in place of cdk.json's (`project_defaults`) where the user
    gave none of their own; the context unchanged without `profile`."""
    values = dict(context)
    name = values.get(PROFILE_KEY)
    if name is None:
        return values
    if name not in PROFILES:
        raise ConfigError(f"setting 'profile' = {name!r} is invalid: expected one of {', '.join(sorted(PROFILES))}")
    for key, value in PROFILES[name].items():
        if key not in values or values[key] == project_defaults.get(key):
            values[key] = value
    return values
