"""The deployed stacks: their names (cdk/build.py's STACK_PREFIX and the stack ids it appends) and outputs."""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import ClientError

# cdk/build.py builds `f"{STACK_PREFIX}<Name>"`; tests/verify/test_stacks.py holds these to it.
STACK_PREFIX: Final = "SdOnEks"
NETWORK: Final = f"{STACK_PREFIX}Network"
CLUSTER: Final = f"{STACK_PREFIX}Cluster"
# On a team's cluster (existingClusterName) the additions stack stands where the network and cluster stacks are.
ADDITIONS: Final = f"{STACK_PREFIX}ClusterAdditions"
IMAGES: Final = f"{STACK_PREFIX}Images"
SERVING: Final = f"{STACK_PREFIX}Serving"
# The network stack is absent where the cluster uses an existing VPC (vpcId), and one of the cluster stack and the
# additions stack is: the others must exist.
REQUIRED: Final = (IMAGES, SERVING)
ALL: Final = (NETWORK, CLUSTER, ADDITIONS, *REQUIRED)


class Stop(Exception):
    """The run cannot start: the one line to print, and the exit status 2."""


def stack_outputs(cfn: Any, region: str) -> dict[str, dict[str, str]]:
    """Each deployed stack's outputs by key; Stop naming the stack and region when a required one is missing."""
    outputs: dict[str, dict[str, str]] = {}
    for name in ALL:
        try:
            stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        except ClientError as exc:
            if name not in REQUIRED:
                continue
            message = exc.response.get("Error", {}).get("Message", str(exc))
            raise Stop(
                f"make verify: stack {name} not found in {region} ({message}); deploy it, or set AWS_REGION"
            ) from None
        outputs[name] = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    if CLUSTER not in outputs and ADDITIONS not in outputs:
        raise Stop(
            f"make verify: stack {CLUSTER} (or {ADDITIONS}, on a team's cluster) not found in {region}; deploy it, "
            "or set AWS_REGION"
        )
    return outputs


def stack_resources(cfn: Any, stack: str, resource_type: str) -> list[str]:
    """The physical ids of a stack's resources of one CloudFormation type (a dashboard's or alarm's name)."""
    pages = cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
    return [
        r["PhysicalResourceId"]
        for page in pages
        for r in page["StackResourceSummaries"]
        if r["ResourceType"] == resource_type and r.get("PhysicalResourceId")
    ]
