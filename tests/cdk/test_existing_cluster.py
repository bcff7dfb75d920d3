"""Serving on a team's cluster (existingClusterName): the settings, and one synth of that mode beside the default.

The synth takes the default synth's settings (DEFAULT_OVERRIDES) plus the import's, so its serving stack can be
compared with the default one object for object.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from cdk import versions
from cdk.config import AppConfig, ConfigError
from cdk.prerequisites import BY_NAME, relied_on
from tests.cdk.conftest import DEFAULT_CONTEXT, EXISTING, REPO_ROOT, Synth
from tests.cdk.manifests import manifests

EXISTING_EXPECTED = (
    "karpenter",
    "load-balancer-controller",
    "nvidia-device-plugin",
    "neuron",
    "pod-identity-agent",
    "cloudwatch-agent",
)
# A compile Job's name ends in a hash of what it compiles, which includes the region's image URI.
INPUT_HASH = re.compile(r"-[0-9a-f]{10}$")
# Resources whose replacement loses what users have: their logical ids must not move.
STATEFUL_TYPES = {
    "AWS::S3::Bucket",
    "AWS::SQS::Queue",
    "AWS::Cognito::UserPool",
    "AWS::KMS::Key",
    "AWS::Logs::LogGroup",
}


def config_of(overrides: dict[str, Any]) -> AppConfig:
    """The AppConfig of cdk.json's context with `overrides`."""
    return AppConfig.from_context({**DEFAULT_CONTEXT, **overrides}, {})


@pytest.mark.parametrize(
    "missing", ["existingClusterSecurityGroupId", "existingClusterKubectlRoleArn", "existingClusterNodeRoleName"]
)
def test_a_missing_attribute_stops_the_synth_naming_it(missing):
    values = {k: v for k, v in EXISTING.items() if k != missing}
    with pytest.raises(ConfigError, match=f"'{missing}' is required with existingClusterName"):
        config_of(values)


def test_the_node_role_is_not_asked_for_when_karpenter_is_ours():
    values = {k: v for k, v in EXISTING.items() if k != "existingClusterNodeRoleName"}
    existing = config_of({**values, "existingClusterKarpenter": "install"}).existing_cluster
    assert existing is not None and existing.node_role_name is None and existing.installs("karpenter")


def test_add_ons_are_expected_unless_a_setting_installs_them():
    existing = config_of(EXISTING).existing_cluster
    assert existing is not None
    assert existing.installs("keda")
    assert set(existing.expected) == set(EXISTING_EXPECTED)


def test_add_on_settings_without_the_cluster_are_refused():
    with pytest.raises(ConfigError, match="'existingClusterKeda' applies only with existingClusterName"):
        config_of({"existingClusterKeda": "install"})


def test_a_bad_add_on_mode_is_refused():
    with pytest.raises(ConfigError, match="existingClusterKeda"):
        config_of({**EXISTING, "existingClusterKeda": "upgrade"})


def resources_of(s: Synth, type_: str) -> list[tuple[str, str]]:
    """(stack, logical id) of every resource of one type."""
    return [
        (stack, lid) for stack, t in s.raw_templates.items() for lid, r in t["Resources"].items() if r["Type"] == type_
    ]


def test_no_network_no_cluster_only_what_is_installed(existing_synth: Synth):
    assert sorted(existing_synth.raw_templates) == ["SdOnEksClusterAdditions", "SdOnEksImages", "SdOnEksServing"]
    for type_ in ("AWS::EKS::Cluster", "AWS::EC2::VPC", "AWS::EKS::Nodegroup", "AWS::EKS::Addon"):
        assert resources_of(existing_synth, type_) == [], type_
    charts = [
        r["Properties"]["Chart"]
        for t in existing_synth.raw_templates.values()
        for r in t["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    ]
    assert charts == ["keda"]  # the one add-on set to install


def test_the_serving_stack_serves_as_in_a_default_synth(existing_synth: Synth, platform_synth: Synth):
    def objects(s: Synth) -> list[tuple[str, str]]:
        serving = manifests(s.raw_templates["SdOnEksServing"])
        return sorted((m["kind"], INPUT_HASH.sub("", m["metadata"]["name"])) for m in serving)

    assert objects(existing_synth) == objects(platform_synth)
    kinds = {kind for kind, _ in objects(existing_synth)}
    assert {"Deployment", "Ingress", "ScaledObject"} <= kinds


def test_stateful_resources_keep_their_logical_ids(existing_synth: Synth, platform_synth: Synth):
    def stateful(s: Synth) -> list[str]:
        return sorted(
            lid for lid, r in s.raw_templates["SdOnEksServing"]["Resources"].items() if r["Type"] in STATEFUL_TYPES
        )

    assert stateful(existing_synth) == stateful(platform_synth)
    assert stateful(existing_synth)


def test_node_pools_are_ours_and_created_never_applied_over(existing_synth: Synth, platform_synth: Synth):
    additions = existing_synth.raw_templates["SdOnEksClusterAdditions"]
    pools = [m for m in manifests(additions) if m["kind"] in ("NodePool", "EC2NodeClass")]
    default = [m for m in manifests(platform_synth.raw_templates["SdOnEksCluster"]) if m["kind"] == "NodePool"]
    assert sorted(p["metadata"]["name"] for p in pools if p["kind"] == "NodePool") == sorted(
        p["metadata"]["name"] for p in default
    )
    for pool in pools:
        assert pool["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sd-on-eks"
    for node_class in (p for p in pools if p["kind"] == "EC2NodeClass"):
        assert node_class["spec"]["role"] == "KarpenterNodeRole-team-cluster"
        assert "instanceProfile" not in node_class["spec"]
    for resource in additions["Resources"].values():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            assert resource["Properties"].get("Overwrite") is not True


# Kinds the API serves cluster-wide (not in a namespace), among those our manifests use.
CLUSTER_SCOPED = {"Namespace", "NodePool", "EC2NodeClass", "ClusterRole", "ClusterRoleBinding", "IngressClass"}


def test_every_cluster_scoped_object_is_ours(existing_synth: Synth):
    """What `cdk destroy` of the serving and additions stacks deletes cluster-wide: each object and its owner."""
    owners = {}
    for stack in ("SdOnEksServing", "SdOnEksClusterAdditions"):
        for m in manifests(existing_synth.raw_templates[stack]):
            if m["kind"] in CLUSTER_SCOPED:
                owners[(m["kind"], m["metadata"]["name"])] = stack
    namespace = existing_synth.config.serving.namespace
    for (kind, name), stack in owners.items():
        if kind in ("NodePool", "EC2NodeClass"):
            assert stack == "SdOnEksClusterAdditions" and name in {a.name for a in existing_synth.config.accelerators}
        elif kind == "Namespace":
            assert name == namespace
        else:  # RBAC for our own controllers: named after our namespace
            assert name.startswith(f"{namespace}-"), (kind, name)
    assert ("Namespace", namespace) in owners
    # Nothing touches the cluster's access: no access entry for a person, no aws-auth.
    assert resources_of(existing_synth, "AWS::EKS::AccessEntry") == []
    assert not any(
        m["metadata"]["name"] == "aws-auth" for t in existing_synth.raw_templates.values() for m in manifests(t)
    )


def test_the_stack_says_what_of_the_cluster_it_uses(existing_synth: Synth):
    outputs = existing_synth.raw_templates["SdOnEksClusterAdditions"]["Outputs"]
    assert "sg-0123456789abcdef0" in str(outputs["ClusterResources"]["Value"])
    assert "karpenter" in outputs["ExpectedPrerequisites"]["Value"]


def test_each_expected_prerequisite_is_checked_before_our_node_pools(existing_synth: Synth, tmp_path: Path):
    """A check per expected add-on (the handler's own test has its one-line messages), none for the one we install;
    our NodePools wait for every verdict, and the serving stack waits for the whole additions stack."""
    additions = existing_synth.raw_templates["SdOnEksClusterAdditions"]
    checks = {lid: r for lid, r in additions["Resources"].items() if r["Type"] == "Custom::Prerequisite"}
    checked = {r["Properties"]["Setting"]: r for r in checks.values()}
    # Both accelerators are on in DEFAULT_OVERRIDES, so both device plugins are expected; KEDA is ours.
    assert sorted(checked) == sorted(BY_NAME[name].setting for name in EXISTING_EXPECTED)
    karpenter = checked["existingClusterKarpenter"]["Properties"]
    assert karpenter["ClusterName"] == "team-cluster"
    assert karpenter["Prerequisite"] == "Karpenter v1 (karpenter)"
    assert [(p["Name"], p["Serves"]) for p in karpenter["Probes"]] == [
        ("nodepools.karpenter.sh", "v1"),
        ("ec2nodeclasses.karpenter.k8s.aws", "v1"),
    ]
    lbc = checked["existingClusterLoadBalancerController"]["Properties"]
    assert lbc["Version"]["Minimum"] == versions.ALB_CONTROLLER_MIN_VERSION
    handler = next(
        r
        for r in additions["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "prerequisite_check.on_event"
    )
    # Its asset holds its own file only (its hash is a folder's holding just that file), so the other handlers'
    # assets, and a default synth, are what they were before it existed.
    only_it = tmp_path / "only-the-handler"
    only_it.mkdir()
    shutil.copy(REPO_ROOT / "lambdas" / "prerequisite_check.py", only_it)
    assert handler["Properties"]["Code"]["S3Key"] == f"{cdk.FileSystem.fingerprint(str(only_it))}.zip"
    assert handler["Properties"]["Role"] == "arn:aws:iam::123456789012:role/team-eks-admin"
    assert handler["Properties"]["VpcConfig"]["SecurityGroupIds"] == ["sg-0123456789abcdef0"]
    pools = [
        r
        for r in additions["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and "NodePool" in json.dumps(r["Properties"])
    ]
    assert pools and all(set(checks) <= set(r.get("DependsOn", [])) for r in pools)
    serving = existing_synth.assembly.get_stack_by_name("SdOnEksServing")
    assert "SdOnEksClusterAdditions" in {d.id for d in serving.dependencies}


def test_only_the_enabled_accelerators_plugins_are_relied_on():
    expected = config_of(EXISTING).existing_cluster
    assert expected is not None
    assert relied_on(expected.expected, ["nvidia"]) == tuple(n for n in EXISTING_EXPECTED if n != "neuron")
    assert relied_on(expected.expected, ["neuron"]) == tuple(
        n for n in EXISTING_EXPECTED if n != "nvidia-device-plugin"
    )
    assert relied_on(expected.expected, ["nvidia", "neuron"]) == EXISTING_EXPECTED


def test_the_neuron_scheduler_extension_is_relied_on_where_pods_ask_for_several_devices():
    from cdk.prerequisites import BY_NAME, NEURON_SCHEDULER

    expected = config_of(EXISTING).existing_cluster
    assert expected is not None
    with_extension = relied_on(expected.expected, ["neuron"], neuron_scheduler=True)
    assert with_extension[with_extension.index("neuron") + 1] == NEURON_SCHEDULER
    assert NEURON_SCHEDULER not in relied_on(expected.expected, ["neuron"])
    assert NEURON_SCHEDULER not in relied_on(expected.expected, ["nvidia"], neuron_scheduler=True)
    # Its own check, under the chart's setting: the chart installs both.
    scheduler = BY_NAME[NEURON_SCHEDULER]
    assert scheduler.setting == BY_NAME["neuron"].setting
    line = scheduler.message("no deployments my-scheduler in kube-system")
    assert "Neuron scheduler extension" in line and f"{scheduler.setting}=install" in line and "\n" not in line
