"""One synth of the serving stack per test session, on a minimal stand-in for the platform.

Fixture interface (kept narrow so the lead can repoint it at the full app's synth):
- `serving_synth(variant)`: a `ServingSynth` with `.template` (assertions.Template of the serving
  stack), `.manifests` (k8s dicts from its Custom::AWSCDK-EKS-KubernetesResource resources, with CFN
  intrinsics substituted by readable placeholders), `.stack`, `.config`, `.platform`, `.app`.
- variant "default": both accelerators, cost mode, HTTPS + CIDR allow-list + SNS topic configured.
- variant "capacity": capacity mode with only the NVIDIA accelerator enabled.
To use the full app: build `ServingSynth` from the app's ServingStack, its PlatformHandle and config.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer

from cdk.accelerators import NEURON, NVIDIA
from cdk.config.serving import ServingConfig
from cdk.platform_handle import PlatformHandle
from cdk.stacks.serving_stack import ServingStack

KUBERNETES_VERSION = "1.36"
ENV = cdk.Environment(account="123456789012", region="us-east-1")
FAKE_IMAGES = {
    "neuron": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:neuron-abc123",
    "nvidia": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:nvidia-abc123",
}
DEFAULT_CONTEXT = {
    "ingressCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0d5e7f1a-1111-2222-3333-444455556666",
    "ingressAllowedCidrs": ["203.0.113.0/24", "198.51.100.0/24"],
    "alarmTopicArn": "arn:aws:sns:us-east-1:123456789012:sd-alarms",
}
CAPACITY_CONTEXT = {"routingMode": "capacity"}
RESOURCE_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"


@dataclass(frozen=True)
class ServingSynth:
    """One synthesized serving stack and what the tests read from it."""

    app: cdk.App
    stack: ServingStack
    config: ServingConfig
    platform: PlatformHandle
    template: assertions.Template
    manifests: list[dict[str, Any]]


class _StandInPlatform(cdk.Stack):
    """Just enough platform: a VPC and an aws_eks_v2 cluster with the kubectl v1.36 layer."""

    def __init__(self, scope: cdk.App, construct_id: str) -> None:
        super().__init__(scope, construct_id, env=ENV)
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1)
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            version=eks.KubernetesVersion.of(KUBERNETES_VERSION),
            vpc=self.vpc,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV36Layer(self, "Kubectl")),
        )


def resolve_intrinsics(value: Any) -> Any:
    """Replace CFN intrinsics with placeholder strings so the k8s schema sees plain values."""
    if isinstance(value, dict):
        if len(value) == 1:
            (key,) = value
            if key == "Ref":
                return f"REF-{value[key]}"
            if key == "Fn::GetAtt":
                return "GETATT-" + "-".join(map(str, value[key]))
            if key == "Fn::Join":
                sep, parts = value[key]
                return sep.join(str(resolve_intrinsics(p)) for p in parts)
            if key.startswith("Fn::"):
                return f"{key[4:].upper()}-VALUE"
        return {k: resolve_intrinsics(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_intrinsics(v) for v in value]
    return value


def manifests_of(template: assertions.Template) -> list[dict[str, Any]]:
    """Every Kubernetes object the template applies, in template order."""
    result: list[dict[str, Any]] = []
    for resource in template.find_resources(RESOURCE_TYPE).values():
        body = resolve_intrinsics(resource["Properties"]["Manifest"])
        result.extend(json.loads(body) if isinstance(body, str) else body)
    return result


@cache
def serving_synth(variant: str = "default") -> ServingSynth:
    """Synthesize once per variant per process."""
    context = {"default": DEFAULT_CONTEXT, "capacity": CAPACITY_CONTEXT}[variant]
    app = cdk.App(
        context={"aws:cdk:bundling-stacks": [], "@aws-cdk/core:validationReportJson": False},
        stack_traces=False,
    )
    platform_stack = _StandInPlatform(app, "StandInPlatform")
    accelerators = (NEURON, NVIDIA) if variant == "default" else (NVIDIA,)
    platform = PlatformHandle(
        cluster=platform_stack.cluster,
        vpc=platform_stack.vpc,
        kubernetes_version=KUBERNETES_VERSION,
        accelerators=accelerators,
        image_uris={a.name: FAKE_IMAGES[a.name] for a in accelerators},
    )
    config = ServingConfig.from_context(context)
    stack = ServingStack(app, "SdServing", config=config, platform=platform, env=ENV)
    template = assertions.Template.from_stack(stack)
    return ServingSynth(app, stack, config, platform, template, manifests_of(template))
