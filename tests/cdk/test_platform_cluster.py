"""The cluster, its add-ons and Helm charts, from the one default synth."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from cdk import versions
from cdk.accelerators import NEURON, NODE_LABEL_KEY, NVIDIA
from cdk.constructs.addons.load_balancer_controller import image_repository
from tests.cdk.conftest import resources_of
from tests.cdk.manifests import helm_charts

CLUSTER = "SdOnEksCluster"


def test_stacks_are_the_platform_three_and_serving(platform_synth):
    assert set(platform_synth.templates) == {"SdOnEksNetwork", "SdOnEksCluster", "SdOnEksImages", "SdOnEksServing"}


def test_cluster_version_logging_and_private_endpoint(platform_synth):
    platform_synth.template(CLUSTER).has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "Version": "1.36",
            "Logging": {
                "ClusterLogging": {
                    "EnabledTypes": [
                        {"Type": t} for t in ("api", "audit", "authenticator", "controllerManager", "scheduler")
                    ]
                }
            },
            "ResourcesVpcConfig": Match.object_like({"EndpointPrivateAccess": True, "EndpointPublicAccess": False}),
            "EncryptionConfig": Match.any_value(),
            "AccessConfig": Match.object_like({"BootstrapClusterCreatorAdminPermissions": True}),
        },
    )


def test_system_node_group_is_small_on_demand_and_labelled(platform_synth):
    groups = resources_of(platform_synth.raw_templates[CLUSTER], "AWS::EKS::Nodegroup")
    assert len(groups) == 1
    props = next(iter(groups.values()))["Properties"]
    assert props["AmiType"] == "AL2023_x86_64_STANDARD"
    assert props["CapacityType"] == "ON_DEMAND"
    assert props["Labels"] == {"role": "system"}
    assert props["ScalingConfig"]["MinSize"] == 2
    assert "Taints" not in props


def test_helm_charts_are_pinned(platform_synth):
    charts = helm_charts(platform_synth.raw_templates[CLUSTER])
    expected = {
        "karpenter": (versions.KARPENTER_CHART_REPOSITORY, versions.KARPENTER_CHART_VERSION),
        "keda": (versions.KEDA_CHART_REPOSITORY, versions.KEDA_CHART_VERSION),
        "nvidia-device-plugin": (
            versions.NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY,
            versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        ),
        "neuron": (versions.NEURON_CHART_REPOSITORY, versions.NEURON_CHART_VERSION),
        "aws-load-balancer-controller": ("https://aws.github.io/eks-charts", "3.2.2"),
    }
    assert set(charts) == set(expected)
    for release, (repository, version) in expected.items():
        assert charts[release]["Repository"] == repository, release
        assert charts[release]["Version"] == version, release


def test_karpenter_chart_knows_cluster_queue_and_runs_on_system_nodes(platform_synth):
    values = helm_charts(platform_synth.raw_templates[CLUSTER])["karpenter"]["Values"]
    assert values["settings"]["clusterName"] == platform_synth.config.cluster_name
    assert values["settings"]["interruptionQueue"]  # the queue's name (a token at synth time)
    assert values["nodeSelector"] == {"role": "system"}


def test_device_plugins_target_our_nodes_and_tolerate_our_taints(platform_synth):
    charts = helm_charts(platform_synth.raw_templates[CLUSTER])
    nvidia = charts["nvidia-device-plugin"]["Values"]
    term = nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == [{"matchExpressions": [{"key": NODE_LABEL_KEY, "operator": "In", "values": ["nvidia"]}]}]
    assert {"key": NVIDIA.taint_key, "operator": "Exists", "effect": "NoSchedule"} in nvidia["tolerations"]

    neuron = charts["neuron"]["Values"]
    assert neuron["scheduler"] == {"enabled": False}  # servingNeuronDevices=1: no pod needs the extension
    assert neuron["devicePlugin"]["nodeSelector"] == NEURON.node_label
    assert {"key": NEURON.taint_key, "operator": "Exists", "effect": "NoSchedule"} in neuron["devicePlugin"][
        "tolerations"
    ]


def test_managed_addons_are_pinned(platform_synth):
    addons = resources_of(platform_synth.raw_templates[CLUSTER], "AWS::EKS::Addon")
    by_name = {a["Properties"]["AddonName"]: a["Properties"] for a in addons.values()}
    assert by_name["eks-pod-identity-agent"]["AddonVersion"] == versions.POD_IDENTITY_AGENT_ADDON_VERSION
    assert by_name["amazon-cloudwatch-observability"]["AddonVersion"] == versions.CLOUDWATCH_OBSERVABILITY_ADDON_VERSION


def test_workload_identities_go_through_pod_identity(platform_synth):
    associations = resources_of(platform_synth.raw_templates[CLUSTER], "AWS::EKS::PodIdentityAssociation")
    bound = {(a["Properties"]["Namespace"], a["Properties"]["ServiceAccount"]) for a in associations.values()}
    assert bound == {
        ("kube-system", "karpenter"),
        ("kube-system", "aws-load-balancer-controller"),
        ("keda", "keda-operator"),
        ("amazon-cloudwatch", "cloudwatch-agent"),
    }
    # Each association waits for the agent add-on.
    agent = next(
        k
        for k, v in resources_of(platform_synth.raw_templates[CLUSTER], "AWS::EKS::Addon").items()
        if v["Properties"]["AddonName"] == "eks-pod-identity-agent"
    )
    for association in associations.values():
        assert agent in association.get("DependsOn", [])


def test_karpenter_interruption_queue_and_rules(platform_synth):
    template = platform_synth.template(CLUSTER)
    template.has_resource_properties("AWS::SQS::Queue", {"MessageRetentionPeriod": 300, "SqsManagedSseEnabled": True})
    rules = resources_of(platform_synth.raw_templates[CLUSTER], "AWS::Events::Rule")
    detail_types = {t for r in rules.values() for t in r["Properties"]["EventPattern"]["detail-type"]}
    assert detail_types == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Instance State-change Notification",
    }


def test_karpenter_nodes_join_through_an_access_entry(platform_synth):
    platform_synth.template(CLUSTER).has_resource_properties("AWS::EKS::AccessEntry", {"Type": "EC2_LINUX"})


def test_load_balancer_controller_image_comes_from_the_clusters_own_region(platform_synth):
    """aws-cdk-lib's default pulls from us-west-2; opt-in regions cannot reach it, others pull cross-region."""
    values = helm_charts(platform_synth.raw_templates[CLUSTER])["aws-load-balancer-controller"]["Values"]
    region = platform_synth.config.region
    assert values["image"]["repository"] == (
        f"{versions.EKS_ADDON_REGISTRIES[region]}/{versions.ALB_CONTROLLER_IMAGE_REPOSITORY}"
    )
    assert f".dkr.ecr.{region}." in values["image"]["repository"]
    assert values["image"]["tag"] == versions.ALB_CONTROLLER_VERSION


def test_opt_in_regions_use_their_own_registry_account_and_unknown_regions_are_named():
    assert image_repository("af-south-1") == (
        "877085696533.dkr.ecr.af-south-1.amazonaws.com/amazon/aws-load-balancer-controller"
    )
    assert image_repository("cn-north-1").startswith("918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn/")
    with pytest.raises(ValueError, match="setting 'region' = 'xx-nowhere-1'"):
        image_repository("xx-nowhere-1")
