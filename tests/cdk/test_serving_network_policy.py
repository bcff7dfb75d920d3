"""Only the load balancer reaches the serving pods: the ALB has subnets of its own, the Ingress places it
there, and the pods' NetworkPolicy admits those subnets' CIDRs alone (every pod has a VPC address, so the
VPC's CIDR would admit every pod of the cluster)."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import aws_cdk as cdk
import pytest

from cdk.config import AppConfig
from cdk.config.context import ConfigError
from cdk.config.serving import ServingConfig
from cdk.constructs.network import INTERNAL_ELB_TAG, LOAD_BALANCER_SUBNET_GROUP, PRIVATE_SUBNET_GROUP, Network
from cdk.serving.network_policy import ALLOW_SERVICE_NAME, DENY_INGRESS_NAME
from cdk.serving.routing import CONTAINER_PORT
from cdk.stacks.serving_stack import load_balancer_subnets
from tests.cdk.conftest import DEFAULT_CONTEXT, EXAMPLE_ENVIRONMENT, resources_of

LBC = "alb.ingress.kubernetes.io/"
NETWORK = "SdOnEksNetwork"


def by_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def admitted(view) -> list[str]:
    policy = by_kind(view.manifests, "NetworkPolicy")[ALLOW_SERVICE_NAME]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": CONTAINER_PORT}]
    return [peer["ipBlock"]["cidr"] for peer in rule["from"]]


def network_subnets(platform_synth) -> dict[str, dict[str, Any]]:
    return resources_of(platform_synth.raw_templates[NETWORK], "AWS::EC2::Subnet")


def group_of(subnet: dict[str, Any]) -> str:
    """The subnet group a subnet of a new VPC belongs to (the CDK's aws-cdk:subnet-name tag)."""
    return {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}["aws-cdk:subnet-name"]


def overlaps(cidrs: list[str], others: list[str]) -> bool:
    return any(ipaddress.ip_network(a).overlaps(ipaddress.ip_network(b)) for a in cidrs for b in others)


def test_every_other_pod_is_denied_first(serving, capacity_serving):
    for view in (serving, capacity_serving):
        deny = by_kind(view.manifests, "NetworkPolicy")[DENY_INGRESS_NAME]
        assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}


def test_internet_facing_alb_pods_admit_only_the_public_subnets(serving, platform_synth):
    subnets = network_subnets(platform_synth)
    public = sorted(
        s["Properties"]["CidrBlock"] for s in subnets.values() if s["Properties"].get("MapPublicIpOnLaunch")
    )
    pods = [s["Properties"]["CidrBlock"] for s in subnets.values() if group_of(s) == PRIVATE_SUBNET_GROUP]
    cidrs = admitted(serving)
    assert sorted(cidrs) == public
    assert pods and not overlaps(cidrs, pods)
    assert platform_synth.config.vpc_cidr not in cidrs
    # The Ingress names those subnets: one import of the network stack's export per public subnet.
    ingress = json.dumps(
        resources_of(platform_synth.raw_templates["SdOnEksServing"], "Custom::AWSCDK-EKS-KubernetesResource")
    )
    public_ids = [k for k, s in subnets.items() if s["Properties"].get("MapPublicIpOnLaunch")]
    annotation = by_kind(serving.manifests, "Ingress")["sd"]["metadata"]["annotations"][LBC + "subnets"]
    assert len(annotation.split(",")) == len(public_ids)
    for logical_id in public_ids:
        assert logical_id in ingress


def test_existing_vpc_alb_goes_to_the_named_group_and_the_pods_admit_only_it(capacity_serving, variant_synth):
    assert capacity_serving.config.front_door.subnet_group == "LoadBalancers"
    annotations = by_kind(capacity_serving.manifests, "Ingress")["sd"]["metadata"]["annotations"]
    assert annotations[LBC + "subnets"] == "subnet-00000000000000005,subnet-00000000000000006"
    assert admitted(capacity_serving) == ["10.20.2.0/24", "10.20.3.0/24"]
    assert not overlaps(admitted(capacity_serving), ["10.20.32.0/19", "10.20.64.0/19"])  # the nodes' subnets


def test_a_new_vpc_has_isolated_load_balancer_subnets_apart_from_the_pods(platform_synth):
    subnets = network_subnets(platform_synth)
    groups: dict[str, list[dict[str, Any]]] = {}
    for subnet in subnets.values():
        groups.setdefault(group_of(subnet), []).append(subnet["Properties"])
    assert set(groups) == {"public", "private", LOAD_BALANCER_SUBNET_GROUP}
    lb = groups[LOAD_BALANCER_SUBNET_GROUP]
    assert len(lb) == platform_synth.config.max_azs
    for props in lb:
        assert not props.get("MapPublicIpOnLaunch")
        assert {"Key": INTERNAL_ELB_TAG, "Value": "1"} in props["Tags"]
        assert not any(t["Key"] == "karpenter.sh/discovery" for t in props["Tags"])  # no node lands here
    assert not overlaps([p["CidrBlock"] for p in lb], [p["CidrBlock"] for p in groups["private"]])
    # Isolated: no route out of the VPC from the load balancers' subnets.
    template = platform_synth.raw_templates[NETWORK]
    lb_tables = {
        k
        for k, r in resources_of(template, "AWS::EC2::RouteTable").items()
        if LOAD_BALANCER_SUBNET_GROUP.replace("-", "") in k
    }
    assert lb_tables
    routes = resources_of(template, "AWS::EC2::Route").values()
    assert not [r for r in routes if r["Properties"]["RouteTableId"].get("Ref") in lb_tables]


def _vpc(context: dict[str, Any]) -> tuple[AppConfig, Any]:
    """cdk.json's own VPC, in a stack of its own (no app synth)."""
    values = DEFAULT_CONTEXT | EXAMPLE_ENVIRONMENT | context
    config = AppConfig.from_context(values, {})
    stack = cdk.Stack(cdk.App(context=values), "Net", env=cdk.Environment(account=config.account, region=config.region))
    return config, Network(stack, "Network", config=config).vpc


def test_cdk_json_defaults_put_the_internal_alb_in_the_load_balancer_subnets():
    config, vpc = _vpc({})
    assert config.serving.front_door.route == "cloudfront" and not config.serving.front_door.internet_facing
    selected = load_balancer_subnets(config.serving, vpc)
    assert [s.ipv4_cidr_block for s in selected.subnets] == [s.ipv4_cidr_block for s in vpc.isolated_subnets]
    assert not overlaps([s.ipv4_cidr_block for s in selected.subnets], [s.ipv4_cidr_block for s in vpc.private_subnets])


def test_a_subnet_group_the_vpc_lacks_names_the_setting():
    _, vpc = _vpc({})
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT | {"ingressSubnetGroup": "Nope"})
    with pytest.raises(ConfigError, match="ingressSubnetGroup"):
        load_balancer_subnets(cfg, vpc)
