"""Accelerated capacity: Karpenter NodePools/EC2NodeClasses (schema-validated) and managed node groups."""

from __future__ import annotations

from cdk import versions
from cdk.accelerators import ACCELERATORS
from tests.cdk.conftest import resources_of
from tests.cdk.manifests import manifests
from tests.support.k8s_schema import validate_all

CLUSTER = "SdOnEksCluster"


def _karpenter_manifests(synth):
    return [m for m in manifests(synth.raw_templates[CLUSTER]) if m["apiVersion"].startswith("karpenter")]


def test_one_node_class_and_pool_per_accelerator_valid_against_karpenter_v1(platform_synth):
    found = _karpenter_manifests(platform_synth)
    kinds = sorted((m["kind"], m["metadata"]["name"]) for m in found)
    assert kinds == [
        ("EC2NodeClass", "neuron"),
        ("EC2NodeClass", "nvidia"),
        ("NodePool", "neuron"),
        ("NodePool", "nvidia"),
    ]
    assert validate_all(found, platform_synth.config.kubernetes_version) == []


def test_schema_check_is_not_blind(platform_synth):
    broken = next(m for m in _karpenter_manifests(platform_synth) if m["kind"] == "NodePool")
    broken = {**broken, "spec": {**broken["spec"], "disruption": {"consolidationPolicy": "Sometimes"}}}
    assert validate_all([broken], platform_synth.config.kubernetes_version)


def test_node_pools_carry_label_taint_families_capacity_and_limits(platform_synth):
    pools = {m["metadata"]["name"]: m for m in _karpenter_manifests(platform_synth) if m["kind"] == "NodePool"}
    for name, pool in pools.items():
        accelerator = ACCELERATORS[name]
        capacity = platform_synth.config.capacity_for(name)
        template = pool["spec"]["template"]
        assert template["metadata"]["labels"] == accelerator.node_label
        assert template["spec"]["taints"] == [{"key": accelerator.taint_key, "value": "true", "effect": "NoSchedule"}]
        requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
        assert requirements["karpenter.k8s.aws/instance-family"] == list(capacity.instance_families)
        assert requirements["karpenter.sh/capacity-type"] == list(capacity.capacity_types)
        # Spot first, on-demand as the fallback Karpenter takes when EC2 has no Spot capacity.
        assert requirements["karpenter.sh/capacity-type"] == ["spot", "on-demand"]
        assert pool["spec"]["limits"] == {"cpu": str(capacity.max_vcpu)}
        assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"


def test_node_classes_pin_the_ami_alias_and_lock_down_nodes(platform_synth):
    classes = [m for m in _karpenter_manifests(platform_synth) if m["kind"] == "EC2NodeClass"]
    for node_class in classes:
        spec = node_class["spec"]
        assert spec["amiSelectorTerms"] == [{"alias": versions.AL2023_AMI_ALIAS}]
        assert "@latest" not in versions.AL2023_AMI_ALIAS
        assert spec["metadataOptions"]["httpTokens"] == "required"
        assert spec["blockDeviceMappings"][0]["ebs"]["encrypted"] is True
        assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": platform_synth.config.cluster_name}}]
        assert spec["instanceProfile"]  # ours, so the controller needs no instance-profile rights


def test_private_subnets_are_tagged_for_discovery(platform_synth):
    subnets = resources_of(platform_synth.raw_templates["SdOnEksNetwork"], "AWS::EC2::Subnet")

    def group(subnet):
        return {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}["aws-cdk:subnet-name"]

    # The load balancers' own subnets are private too, but take no node (tests/cdk/test_serving_network_policy.py).
    private = [s for s in subnets.values() if group(s) == "private"]
    public = [s for s in subnets.values() if s["Properties"].get("MapPublicIpOnLaunch")]
    assert len(private) >= 2 and len(public) >= 2
    for subnet in private:
        tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
        assert tags["karpenter.sh/discovery"] == platform_synth.config.cluster_name
    for subnet in public:
        assert {"Key": "kubernetes.io/role/elb", "Value": "1"} in subnet["Properties"]["Tags"]
    azs = {s["Properties"]["AvailabilityZone"]["Fn::Select"][0] for s in private}
    assert len(azs) >= 2


def test_flow_logs_are_on(platform_synth):
    platform_synth.template("SdOnEksNetwork").has_resource_properties(
        "AWS::EC2::FlowLog", {"TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs"}
    )


# The variant: nvidia only, managed node groups, existing VPC, public endpoint by CIDR.


def test_variant_uses_managed_accelerated_node_groups_without_karpenter(variant_synth):
    template = variant_synth.raw_templates[CLUSTER]
    groups = {
        g["Properties"].get("AmiType"): g["Properties"] for g in resources_of(template, "AWS::EKS::Nodegroup").values()
    }
    assert set(groups) == {"AL2023_x86_64_STANDARD", "AL2023_x86_64_NVIDIA"}
    nvidia = groups["AL2023_x86_64_NVIDIA"]
    assert nvidia["Labels"] == {"accelerator": "nvidia"}
    assert nvidia["Taints"] == [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}]
    assert nvidia["InstanceTypes"] == ["g5.xlarge", "g6.xlarge"]
    assert nvidia["CapacityType"] == "SPOT"
    assert not [m for m in manifests(template) if m["apiVersion"].startswith("karpenter")]
    assert "karpenter" not in str(template.get("Resources", {})).lower()


def test_variant_turning_neuron_off_removes_all_of_its_resources(variant_synth):
    assert [a.name for a in variant_synth.handle.accelerators] == ["nvidia"]
    assert set(variant_synth.handle.image_uris) == {"nvidia"}
    for name, template in variant_synth.raw_templates.items():
        assert "neuron" not in str(template).lower(), name


def test_variant_honours_the_existing_vpc(variant_synth):
    assert "SdOnEksNetwork" not in variant_synth.templates  # nothing to create
    template = variant_synth.raw_templates[CLUSTER]
    assert not resources_of(template, "AWS::EC2::VPC")
    cluster = next(iter(resources_of(template, "AWS::EKS::Cluster").values()))["Properties"]
    subnets = cluster["ResourcesVpcConfig"]["SubnetIds"]
    assert subnets == ["subnet-00000000000000003", "subnet-00000000000000004"]
    security_group = next(iter(resources_of(template, "AWS::EC2::SecurityGroup").values()))["Properties"]
    assert security_group["VpcId"] == "vpc-0123456789abcdef0"


def test_variant_public_endpoint_restricted_to_the_configured_cidrs(variant_synth):
    cluster = next(iter(resources_of(variant_synth.raw_templates[CLUSTER], "AWS::EKS::Cluster").values()))
    vpc_config = cluster["Properties"]["ResourcesVpcConfig"]
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.0/24"]
