"""The cost at rest against what the synth creates: the KMS keys it counts, the NAT gateways' public addresses, the
kubectl tunnel and the system nodes' disks; and the docs' tables against `python -m cdk.costs` itself."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from cdk.build import STACK_PREFIX
from cdk.composition import workloads_for
from cdk.constructs import kubectl_tunnel
from cdk.costs.__main__ import main
from cdk.costs.at_rest import SYSTEM_NODE_DISK_GIB, SYSTEM_NODE_DISK_TYPE, CostAtRest, cost_at_rest
from cdk.costs.kms_keys import customer_managed_keys
from cdk.front_door.waf import rule_count as waf_rule_count
from tests.cdk.conftest import EXISTING, REPO_ROOT, Synth, resources_of

# The README's trial, cdk.json with the alb-https front door and the LLM, the variant (an existing VPC, weights
# brought, no tunnel) and a team's cluster: between them every condition of cdk/costs/kms_keys.py takes both values.
SYNTHS = ("trial_synth", "platform_synth", "variant_synth", "existing_synth")


def cost_of(synth: Synth) -> CostAtRest:
    config = synth.config
    return cost_at_rest(config, (line for w in workloads_for(config) for line in w.kept_up()))


def items(cost: CostAtRest) -> dict[str, float]:
    return {line.item: line.usd_per_hour for line in cost.lines}


@pytest.mark.parametrize("name", SYNTHS)
def test_the_kms_keys_priced_are_the_synths_keys(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    synthesized = Counter(
        stack for stack, template in synth.raw_templates.items() for _ in resources_of(template, "AWS::KMS::Key")
    )
    counted = Counter(f"{STACK_PREFIX}{key.stack}" for key in customer_managed_keys(synth.config))
    assert counted == synthesized
    assert f"{sum(synthesized.values())} x KMS customer managed key" in items(cost_of(synth))


@pytest.mark.parametrize("name", SYNTHS)
def test_the_web_acls_rules_priced_are_the_synths(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    acls = [acl for t in synth.raw_templates.values() for acl in resources_of(t, "AWS::WAFv2::WebACL").values()]
    serving = [acl for acl in acls if acl["Properties"]["Scope"] == "REGIONAL"]
    (acl,) = serving
    assert waf_rule_count(synth.config.serving) == len(acl["Properties"]["Rules"])


@pytest.mark.parametrize("name", SYNTHS)
def test_each_nat_gateways_public_address_is_priced(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    eips = sum(len(resources_of(t, "AWS::EC2::EIP")) for t in synth.raw_templates.values())
    nat_gateways = sum(len(resources_of(t, "AWS::EC2::NatGateway")) for t in synth.raw_templates.values())
    assert eips == nat_gateways
    priced = [item for item in items(cost_of(synth)) if "public IPv4" in item]
    if eips:
        assert priced == [f"{eips} x public IPv4 address (the NAT gateways')"]
    else:  # an existing VPC's NAT gateways are not this deploy's
        assert priced == []


@pytest.mark.parametrize("name", SYNTHS)
def test_the_kubectl_tunnel_is_priced_as_synthesized(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    instances = [i for t in synth.raw_templates.values() for i in resources_of(t, "AWS::EC2::Instance").values()]
    priced = [item for item in items(cost_of(synth)) if item.startswith("kubectl tunnel")]
    if not synth.config.access.kubectl_tunnel or synth.config.existing_cluster is not None:
        assert instances == [] and priced == []
        return
    (instance,) = instances
    (root,) = instance["Properties"]["BlockDeviceMappings"]
    size, volume_type = root["Ebs"]["VolumeSize"], root["Ebs"]["VolumeType"]
    assert priced == [
        f"kubectl tunnel: 1 x {instance['Properties']['InstanceType']} and its {size} GiB {volume_type} disk"
    ]
    assert (size, volume_type) == (kubectl_tunnel.ROOT_VOLUME_GIB, "gp3")


@pytest.mark.parametrize("name", ("trial_synth", "platform_synth"))
def test_the_system_nodes_disks_are_the_eks_defaults_priced(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    (nodegroup,) = resources_of(synth.raw_templates[f"{STACK_PREFIX}Cluster"], "AWS::EKS::Nodegroup").values()
    # No disk size and no launch template of ours: EKS's default root volume is what the line prices.
    assert "DiskSize" not in nodegroup["Properties"] and "LaunchTemplate" not in nodegroup["Properties"]
    nodes = nodegroup["Properties"]["ScalingConfig"]["DesiredSize"]
    line = f"{nodes} x {SYSTEM_NODE_DISK_GIB} GiB {SYSTEM_NODE_DISK_TYPE} system node disks"
    assert line in items(cost_of(synth))


def printed_table(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The at-rest table `python -m cdk.costs ARGS` prints (its first block)."""
    main(list(args))
    return capsys.readouterr().out.split("\n\n")[0]


def test_trial_md_shows_the_trials_items(capsys: pytest.CaptureFixture[str]) -> None:
    assert printed_table(capsys, "profile=trial") in (REPO_ROOT / "docs" / "trial.md").read_text()


def test_platform_md_and_the_readme_show_the_defaults_items(capsys: pytest.CaptureFixture[str]) -> None:
    table = printed_table(capsys)
    platform = (REPO_ROOT / "docs" / "platform.md").read_text()
    assert table in platform
    total = re.search(r"\*\*\$([\d.]+) an hour \(\$([\d,]+) a month\)\*\*", table)
    assert total
    hour, month = total.groups()
    # The summary under "Before you deploy" and the README quote the same total.
    assert f"≈ ${hour} an hour (≈ ${month} a month)" in platform
    assert f"about ${hour} an hour (about ${month} a month)" in (REPO_ROOT / "README.md").read_text()


# Of a cluster and network of our own: what a deploy on a team's cluster neither creates nor prices.
OWN_CLUSTER_TYPES = ("AWS::EKS::Cluster", "AWS::EKS::Nodegroup", "AWS::EC2::NatGateway", "AWS::EC2::Instance")
OWN_CLUSTER_ITEMS = ("EKS control plane", "system nodes", "system node disks", "NAT gateway", "kubectl tunnel")


def test_on_a_teams_cluster_only_what_it_adds_is_priced(existing_synth: Synth) -> None:
    for type_ in OWN_CLUSTER_TYPES:
        assert not any(resources_of(t, type_) for t in existing_synth.raw_templates.values()), type_
    priced = items(cost_of(existing_synth))
    assert not [item for item in priced if any(own in item for own in OWN_CLUSTER_ITEMS)]
    assert {"ALB", "WAF web ACL and its rules", "CloudWatch logs and dashboard"} <= set(priced)
    assert any(item.endswith("image pod kept up") for item in priced)


def costs_args(overrides: dict[str, object]) -> list[str]:
    """`make costs COSTS_ARGS="k=v ..."` as the docs give it for a team's cluster."""
    return [f"{key}={value}" for key, value in overrides.items()]


def test_platform_md_shows_the_existing_clusters_items(capsys: pytest.CaptureFixture[str]) -> None:
    table = printed_table(capsys, *costs_args(EXISTING))
    assert "EKS control plane" not in table and "| ALB |" in table
    assert table in (REPO_ROOT / "docs" / "platform.md").read_text()


def test_a_bad_setting_is_one_line_not_a_traceback() -> None:
    with pytest.raises(SystemExit, match=r"^make costs: setting 'vpcId' is required with existingClusterName"):
        main(["existingClusterName=team-cluster"])
    with pytest.raises(SystemExit, match=r"^make costs: vpcId: give settings as key=value"):
        main(["vpcId"])
