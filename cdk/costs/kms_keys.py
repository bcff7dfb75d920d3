"""The customer managed KMS keys a deploy creates, stack by stack, read from the settings that decide them.

Each entry names the construct that creates the key; tests/cdk/test_costs_at_rest.py holds this list to the
`AWS::KMS::Key` resources of several synths, so a key added to a stack without a line here fails there.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk.config import AppConfig
from cdk.prerequisites import relied_on


@dataclass(frozen=True)
class ManagedKey:
    """One customer managed key: the stack it is in (without the app's prefix) and what it encrypts."""

    stack: str
    purpose: str


def customer_managed_keys(config: AppConfig) -> tuple[ManagedKey, ...]:
    """The keys a deploy with `config` creates (each rotates yearly; docs/platform.md says which outlive a
    destroy)."""
    existing = config.existing_cluster
    if existing is None:
        keys = [ManagedKey("Cluster", "Kubernetes secrets (cdk/constructs/cluster.py SecretsKey)")]
    else:  # the team's cluster encrypts its own secrets; ours is the prerequisite check's log key, if it checks any
        relied = relied_on(existing.expected, (a.name for a in config.accelerators))
        keys = [ManagedKey("ClusterAdditions", "the prerequisite check's log groups (cdk/constructs/log_groups.py)")]
        keys = keys if relied else []
    if config.vpc_id is None:
        # A looked-up VPC has no stack of its own, so no flow-log group and no logs key.
        keys.append(ManagedKey("Network", "the flow-log group (cdk/constructs/log_groups.py, one per stack)"))
    keys += [
        ManagedKey("Images", "the image builds' artifacts (cdk/constructs/image_builds.py BuildKey)"),
        ManagedKey("Images", "the build log groups (cdk/constructs/log_groups.py)"),
        ManagedKey("Serving", "the handlers' log groups (cdk/constructs/log_groups.py)"),
        ManagedKey("Serving", "the job queue, topic and results (cdk/image/jobs.py Key)"),
    ]
    if config.serving.stages_weights:
        keys.append(ManagedKey("Serving", "the image weights' staging build (cdk/serving/model_staging.py)"))
    if config.llm is not None:
        keys.append(ManagedKey("Serving", "the LLM weights' staging build (cdk/serving/model_staging.py)"))
    return tuple(keys)
