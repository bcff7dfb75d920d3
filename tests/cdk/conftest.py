"""One synth of the whole app per test session (plus one combined-variant synth), shared by all
infra tests. Platform tests take `platform_synth` (defined in tests/conftest.py, as the pod rehearsal
shares it) / `variant_synth`; serving tests take the `serving` / `capacity_serving` views of the same two
synths."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import cx_api
from aws_cdk.assertions import Template

from cdk.build import STACK_PREFIX, build_app, read_config, resolve_context
from cdk.chassis.workload import Workload
from cdk.composition import workloads_for
from cdk.config import AppConfig, ServingConfig
from cdk.config.llm import LlmConfig
from cdk.platform_handle import PlatformHandle
from tests.cdk.manifests import manifests

REPO_ROOT = Path(__file__).resolve().parents[2]
# cdk.json's context with its image model preset applied (imageModelFamily is the preset's, not cdk.json's).
DEFAULT_CONTEXT: dict[str, Any] = resolve_context(json.loads((REPO_ROOT / "cdk.json").read_text())["context"])
# What `make synth` adds offline: with no account, the labelled example environment (not deployable).
EXAMPLE_ENVIRONMENT: dict[str, Any] = {"exampleEnvironment": True}

DEPLOYER_ARN = "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_0123abcd"
VARIANT_ADMIN_ARN = "arn:aws:iam::123456789012:role/PlatformAdmin"
# The default synth also turns on the serving stack's optional features (HTTPS, allow-list, alarm topic, a Hub
# token secret), so they are checked too.
DEFAULT_OVERRIDES: dict[str, Any] = {
    # The other front door (the variant keeps cdk.json's cloudfront one): the ALB's own HTTPS.
    "ingressFrontDoor": "alb-https",
    "ingressInternetFacing": True,
    "ingressDomainName": "sd.example.com",
    # People sign in with a given OIDC provider, federated by the user pool.
    "authOidcIssuer": "https://login.example.com/realms/staff",
    "authOidcClientId": "stable-diffusion",
    "authOidcClientSecretName": "sd/oidc-client-secret",
    "ingressCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0d5e7f1a-1111-2222-3333-444455556666",
    "ingressAllowedCidrs": ["203.0.113.0/24", "198.51.100.0/24"],
    "alarmTopicArn": "arn:aws:sns:us-east-1:123456789012:sd-alarms",
    "servingHubTokenSecretName": "arn:aws:secretsmanager:us-east-1:123456789012:secret:sd/hub-token-AbCdEf",
    # LLM serving on both accelerators (the variant keeps it off, as cdk.json does).
    "llmEnabled": True,
    # What `make deploy` passes: the caller's role (an SSO role, with its path).
    "deployerArn": DEPLOYER_ARN,
}

# The variant: capacity routing, one accelerator off, managed node groups, an existing VPC (its lookup answered
# from context so no AWS call is made), a public endpoint restricted by CIDR, weights brought as an s3:// URI.
VARIANT_ACCOUNT, VARIANT_REGION, VARIANT_VPC = "123456789012", "us-east-1", "vpc-0123456789abcdef0"
VARIANT_OVERRIDES: dict[str, Any] = {
    "accelerators": "nvidia",  # a string, as `-c accelerators=nvidia` gives it
    "nodeProvisioner": "managed",
    "vpcId": VARIANT_VPC,
    "account": VARIANT_ACCOUNT,
    "region": VARIANT_REGION,
    "endpointAccess": "public-and-private",
    "endpointPublicCidrs": "203.0.113.0/24,198.51.100.0/24",
    "routingMode": "capacity",
    # Another base image than cdk/versions.py's (the 2.11 DLC, aws/deep-learning-containers
    # docs/src/data/pytorch/2.11-cuda-ec2.yml): its image tag must differ from the default synth's.
    "nvidiaBaseImage": "763104351884.dkr.ecr.{region}.amazonaws.com/pytorch:2.11.0-cu130-amzn2023",
    "servingModelId": "s3://example-weights/sd21/",  # weights brought, so nothing is staged
    "nvidiaCapacityTypes": "spot",  # a managed node group takes one capacity type
    # The cloudfront route's WAF allow-list, for both address families.
    "ingressAllowedCidrs": ["203.0.113.0/24"],
    "ingressAllowedIpv6Cidrs": ["2001:db8::/32"],
    # The existing VPC's subnets that hold only load balancers (its lookup below has such a group).
    "ingressSubnetGroup": "LoadBalancers",
    # No tunnel instance (the public endpoint above serves kubectl), and a deployer already among the admins.
    "kubectlTunnel": False,
    "adminRoleArns": [VARIANT_ADMIN_ARN],
    "deployerArn": VARIANT_ADMIN_ARN,
}

# A team's cluster (existingClusterName) with the attributes the import needs; the synth of this mode takes
# DEFAULT_OVERRIDES under it, so its serving stack compares with the default one object for object.
EXISTING: dict[str, Any] = {
    "account": VARIANT_ACCOUNT,
    "region": VARIANT_REGION,
    "vpcId": VARIANT_VPC,
    "ingressSubnetGroup": "Public",  # DEFAULT_OVERRIDES' front door is internet-facing
    "existingClusterName": "team-cluster",
    "existingClusterSecurityGroupId": "sg-0123456789abcdef0",
    "existingClusterKubectlRoleArn": "arn:aws:iam::123456789012:role/team-eks-admin",
    "existingClusterNodeRoleName": "KarpenterNodeRole-team-cluster",
    "existingClusterKeda": "install",  # one add-on installed, the others expected
}


# The README's trial deploy: `-c profile=trial` over cdk.json (docs/trial.md).
TRIAL_OVERRIDES: dict[str, Any] = {"profile": "trial"}
# One setting picks the catalog's SDXL preset on both accelerators (docs/serving.md, "The image model catalog").
SDXL_OVERRIDES: dict[str, Any] = {"imageModel": "sdxl-base"}
# And FLUX.1-schnell's: for the pod rehearsal of the preset whose pods differ most (tests/rehearsal/).
# FLUX.1-schnell is gated on the Hub: its synth needs a token secret (cdk/config/hub_token.py).
FLUX_OVERRIDES: dict[str, Any] = {"imageModel": "flux-schnell", "servingHubTokenSecretName": "sd/hub-token"}


def vpc_lookup_context(account: str, region: str, vpc_id: str) -> dict[str, Any]:
    """What `cdk synth` would have cached in cdk.context.json after looking the VPC up."""
    key = f"vpc-provider:account={account}:filter.vpc-id={vpc_id}:region={region}:returnAsymmetricSubnets=true"

    def subnet(index: int, az: str, cidr: str) -> dict[str, str]:
        return {
            "subnetId": f"subnet-0{index:016x}",
            "cidr": cidr,
            "availabilityZone": az,
            "routeTableId": f"rtb-0{index:016x}",
        }

    return {
        key: {
            "vpcId": vpc_id,
            "vpcCidrBlock": "10.20.0.0/16",
            "ownerAccountId": account,
            "availabilityZones": [],
            "subnetGroups": [
                {
                    "name": "Public",
                    "type": "Public",
                    "subnets": [subnet(1, "us-east-1a", "10.20.0.0/24"), subnet(2, "us-east-1b", "10.20.1.0/24")],
                },
                {
                    "name": "Private",
                    "type": "Private",
                    "subnets": [subnet(3, "us-east-1a", "10.20.32.0/19"), subnet(4, "us-east-1b", "10.20.64.0/19")],
                },
                {
                    "name": "LoadBalancers",
                    "type": "Isolated",
                    "subnets": [subnet(5, "us-east-1a", "10.20.2.0/24"), subnet(6, "us-east-1b", "10.20.3.0/24")],
                },
            ],
        },
        f"availability-zones:account={account}:region={region}": ["us-east-1a", "us-east-1b"],
    }


@dataclass(frozen=True)
class Synth:
    """One synthesized app: its config, the handle, the cloud assembly and a Template per stack."""

    config: AppConfig
    handle: PlatformHandle
    assembly: cx_api.CloudAssembly
    templates: Mapping[str, Template]
    raw_templates: Mapping[str, dict[str, Any]]
    outdir: Path

    def template(self, stack_name: str) -> Template:
        """The assertions Template of a stack by name (e.g. SdOnEksCluster)."""
        return self.templates[stack_name]


def synth(
    outdir: Path,
    overrides: Mapping[str, Any] | None = None,
    extra_workloads: Callable[[AppConfig], Sequence[Workload]] = lambda _: (),
) -> Synth:
    """Synthesize the whole app as `cdk synth` would, minus asset staging and the built-in
    CloudFormation validator (cfn-lint covers the templates, faster); cdk-nag still runs, and an
    unacknowledged finding fails this call. `extra_workloads`: workloads served beside the composition root's."""
    # account/region come only from the overrides, never from a developer's shell.
    os.environ.pop("CDK_DEFAULT_ACCOUNT", None)
    os.environ.pop("CDK_DEFAULT_REGION", None)
    context = {**DEFAULT_CONTEXT, **EXAMPLE_ENVIRONMENT, **(overrides or {}), "aws:cdk:disable-asset-staging": True}
    if overrides and "vpcId" in overrides:
        context.update(vpc_lookup_context(overrides["account"], overrides["region"], overrides["vpcId"]))
    app = cdk.App(context=context, outdir=str(outdir), builtin_cloud_formation_validation=False)
    config = read_config(app)
    handle = build_app(app, config, [*workloads_for(config), *extra_workloads(config)])
    assembly = app.synth()
    # Read the files: the assembly's Python wrappers do not marshal every property.
    missing = json.loads((outdir / "manifest.json").read_text()).get("missing", [])
    assert not missing, f"synth would call AWS for {[m['key'] for m in missing]}"
    raw = {p.name.removesuffix(".template.json"): json.loads(p.read_text()) for p in outdir.glob("*.template.json")}
    return Synth(
        config=config,
        handle=handle,
        assembly=assembly,
        templates={name: Template.from_json(t) for name, t in raw.items()},
        raw_templates=raw,
        outdir=outdir,
    )


@pytest.fixture(scope="session")
def existing_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Serving on a team's cluster (EXISTING over DEFAULT_OVERRIDES); cdk-nag runs in it and fails it on a finding."""
    return synth(tmp_path_factory.mktemp("cdk-existing"), {**DEFAULT_OVERRIDES, **EXISTING})


@pytest.fixture(scope="session")
def variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Neuron off, managed node groups, existing VPC, public endpoint restricted to two CIDRs,
    capacity routing."""
    return synth(tmp_path_factory.mktemp("cdk-variant"), VARIANT_OVERRIDES)


def service_deployments(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Stable Diffusion Deployments (workloads.APP_LABEL), not the routing controller's."""
    from cdk.image.workload import APP_LABEL

    return [
        m
        for m in manifests
        if m["kind"] == "Deployment" and APP_LABEL.items() <= m["metadata"].get("labels", {}).items()
    ]


def as_list(value: Any) -> list[Any]:
    """An IAM policy field (Action, Resource) as a list: CloudFormation allows a single value too."""
    return value if isinstance(value, list) else [value]


def resources_of(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource for one CloudFormation type."""
    return {k: v for k, v in template.get("Resources", {}).items() if v["Type"] == resource_type}


@dataclass(frozen=True)
class ServingSynth:
    """The serving stack of one synth: its settings, the platform it got, its template and manifests."""

    config: ServingConfig
    platform: PlatformHandle
    template: Template
    manifests: list[dict[str, Any]]  # the Kubernetes objects it applies, intrinsics as placeholders
    llm: LlmConfig | None = None  # LLM serving's settings, when the synth has llmEnabled


def serving_view(app_synth: Synth) -> ServingSynth:
    """The serving stack's part of a full-app synth."""
    name = f"{STACK_PREFIX}Serving"
    return ServingSynth(
        config=app_synth.config.serving,
        llm=app_synth.config.llm,
        platform=app_synth.handle,
        template=app_synth.templates[name],
        manifests=manifests(app_synth.raw_templates[name]),
    )


@pytest.fixture(scope="session")
def serving(platform_synth: Synth) -> ServingSynth:
    """Both accelerators, cost routing, the alb-https front door with an allow-list, OIDC sign-in and an alarm topic."""
    return serving_view(platform_synth)


@pytest.fixture(scope="session")
def serving_template(serving: ServingSynth) -> Template:
    """assertions.Template of the serving stack."""
    return serving.template


@pytest.fixture(scope="session")
def serving_manifests(serving: ServingSynth) -> list[dict[str, Any]]:
    """The Kubernetes objects the serving stack applies."""
    return serving.manifests


@pytest.fixture(scope="session")
def capacity_serving(variant_synth: Synth) -> ServingSynth:
    """Capacity routing with only the NVIDIA accelerator enabled."""
    return serving_view(variant_synth)
