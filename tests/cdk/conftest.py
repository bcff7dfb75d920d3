"""One synth of the whole app per test session (plus one combined-variant synth), shared by all
infra tests. Add assertions by taking the `platform_synth` fixture; a stack the lead adds to
`build_app` shows up in `platform_synth.templates` under its stack name without changes here."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import cx_api
from aws_cdk.assertions import Template

from cdk.build import build_app, read_config
from cdk.config import AppConfig
from cdk.platform_handle import PlatformHandle

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONTEXT: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]

# The variant: one accelerator off, managed node groups, an existing VPC (its lookup answered
# from context so no AWS call is made), a public endpoint restricted by CIDR.
VARIANT_ACCOUNT, VARIANT_REGION, VARIANT_VPC = "123456789012", "us-east-1", "vpc-0123456789abcdef0"
VARIANT_OVERRIDES: dict[str, Any] = {
    "accelerators": "nvidia",  # a string, as `-c accelerators=nvidia` gives it
    "nodeProvisioner": "managed",
    "vpcId": VARIANT_VPC,
    "account": VARIANT_ACCOUNT,
    "region": VARIANT_REGION,
    "endpointAccess": "public-and-private",
    "endpointPublicCidrs": "203.0.113.0/24,198.51.100.0/24",
}


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


def synth(outdir: Path, overrides: Mapping[str, Any] | None = None) -> Synth:
    """Synthesize the whole app as `cdk synth` would, minus asset staging and the built-in
    CloudFormation validator (cfn-lint covers the templates, faster); cdk-nag still runs, and an
    unacknowledged finding fails this call."""
    # account/region come only from the overrides, never from a developer's shell.
    os.environ.pop("CDK_DEFAULT_ACCOUNT", None)
    os.environ.pop("CDK_DEFAULT_REGION", None)
    context = {**DEFAULT_CONTEXT, **(overrides or {}), "aws:cdk:disable-asset-staging": True}
    if overrides and "vpcId" in overrides:
        context.update(vpc_lookup_context(overrides["account"], overrides["region"], overrides["vpcId"]))
    app = cdk.App(context=context, outdir=str(outdir), builtin_cloud_formation_validation=False)
    config = read_config(app)
    handle = build_app(app, config)
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
def platform_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The default app (cdk.json as shipped)."""
    yield synth(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Neuron off, managed node groups, existing VPC, public endpoint restricted to two CIDRs."""
    return synth(tmp_path_factory.mktemp("cdk-variant"), VARIANT_OVERRIDES)


def resources_of(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource for one CloudFormation type."""
    return {k: v for k, v in template.get("Resources", {}).items() if v["Type"] == resource_type}
