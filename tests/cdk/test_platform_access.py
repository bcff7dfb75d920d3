"""kubectl after the README's deploy: the deploying principal's access entry and the tunnel to the private
endpoint, from the one default synth (deployerArn as `make deploy` passes it) and the variant (kubectlTunnel off,
the deployer already among adminRoleArns)."""

from __future__ import annotations

import json

import pytest

from cdk.config import ConfigError
from cdk.kubectl_access import PORT_FORWARDING_DOCUMENT
from tests.cdk.conftest import DEPLOYER_ARN, VARIANT_ADMIN_ARN, resources_of
from tests.cdk.test_config import _config

CLUSTER = "SdOnEksCluster"
CLUSTER_ADMIN = {
    "AccessScope": {"Type": "cluster"},
    "PolicyArn": {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"],
        ]
    },
}


def _entries_for(template: dict, principal: str) -> list[dict]:
    return [
        r["Properties"]
        for r in resources_of(template, "AWS::EKS::AccessEntry").values()
        if r["Properties"].get("PrincipalArn") == principal
    ]


def test_the_deploying_principal_is_a_cluster_admin(platform_synth):
    (entry,) = _entries_for(platform_synth.raw_templates[CLUSTER], DEPLOYER_ARN)
    assert entry.get("Type", "STANDARD") == "STANDARD"  # EKS's default type: Kubernetes RBAC from the policy
    assert entry["AccessPolicies"] == [CLUSTER_ADMIN]


def test_a_deployer_among_the_admins_gets_one_entry_and_no_tunnel_is_built_when_it_is_off(variant_synth):
    template = variant_synth.raw_templates[CLUSTER]
    assert len(_entries_for(template, VARIANT_ADMIN_ARN)) == 1  # EKS refuses a second entry for a principal
    assert not resources_of(template, "AWS::EC2::Instance")
    assert not {k for k in template["Outputs"] if k.startswith("KubectlTunnel")}


def test_the_tunnel_instance_takes_no_inbound_and_runs_imdsv2_encrypted_in_a_private_subnet(platform_synth):
    template = platform_synth.raw_templates[CLUSTER]
    ((instance_id, instance),) = resources_of(template, "AWS::EC2::Instance").items()
    props = instance["Properties"]
    (interface,) = props["NetworkInterfaces"]
    assert interface["AssociatePublicIpAddress"] is False
    assert "privateSubnet" in json.dumps(interface["SubnetId"])
    assert all(m["Ebs"]["Encrypted"] is True for m in props["BlockDeviceMappings"])
    ((_, launch_template),) = resources_of(template, "AWS::EC2::LaunchTemplate").items()
    assert launch_template["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpTokens"] == "required"

    (group_ref,) = interface["GroupSet"]
    group = template["Resources"][group_ref["Fn::GetAtt"][0]]["Properties"]
    assert "SecurityGroupIngress" not in group
    (egress,) = group["SecurityGroupEgress"]
    assert (egress["IpProtocol"], egress["FromPort"], egress["ToPort"]) == ("tcp", 443, 443)
    # Its only way in to the cluster: the cluster security group lets it reach the endpoint on 443.
    (rule,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == group_ref
    ]
    assert rule["GroupId"]["Fn::GetAtt"][1] == "ClusterSecurityGroupId"
    assert template["Resources"][rule["GroupId"]["Fn::GetAtt"][0]]["Type"] == "AWS::EKS::Cluster"
    assert (rule["FromPort"], rule["ToPort"], rule["IpProtocol"]) == (443, 443, "tcp")

    profile = template["Resources"][props["IamInstanceProfile"]["Ref"]]["Properties"]
    (role_ref,) = profile["Roles"]
    role = template["Resources"][role_ref["Ref"]]["Properties"]
    assert json.dumps(role["ManagedPolicyArns"]).count("policy/") == 1
    assert "AmazonSSMManagedInstanceCore" in json.dumps(role["ManagedPolicyArns"])
    assert "Policies" not in role
    assert not [p for p in resources_of(template, "AWS::IAM::Policy").values() if role_ref in p["Properties"]["Roles"]]
    assert template["Outputs"]["KubectlTunnelInstanceId"]["Value"] == {"Ref": instance_id}


def test_the_session_output_is_the_command_the_tunnel_tool_runs(platform_synth):
    line = json.dumps(platform_synth.raw_templates[CLUSTER]["Outputs"]["KubectlTunnelSession"]["Value"])
    assert "aws ssm start-session --region us-east-1 --target " in line
    assert f"--document-name {PORT_FORWARDING_DOCUMENT} --parameters" in line
    assert '\\"portNumber\\":[\\"443\\"],\\"localPortNumber\\":[\\"8443\\"]' in line


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:sts::123456789012:assumed-role/Admin/jane",  # a session, not the role
        "arn:aws:iam::123456789012:root",
        "Admin",
    ],
)
def test_a_deployer_arn_that_is_no_role_or_user_is_refused(arn):
    with pytest.raises(ConfigError, match="deployerArn"):
        _config(deployerArn=arn)


def test_kubectl_tunnel_and_deployer_defaults():
    config = _config()
    assert config.access.kubectl_tunnel is True
    assert config.access.deployer_arn is None
    assert _config(kubectlTunnel="false").access.kubectl_tunnel is False
