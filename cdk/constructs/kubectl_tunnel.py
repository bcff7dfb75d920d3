"""The kubectl tunnel: a tiny instance in a private subnet that SSM Session Manager port-forwards to the cluster's
private API endpoint (tools/kubectl_tunnel.py starts the session), so kubectl works without a public endpoint.

It takes no inbound connection at all: the SSM agent dials out to Session Manager over HTTPS, and the session
forwards a local port to the endpoint on 443 through the instance. Its only ingress is the cluster security
group's rule that lets it reach the endpoint.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk.nag import MANAGED_POLICY, acknowledge

# The smallest Graviton burstable size: it only relays a TCP stream for a session's lifetime.
INSTANCE_TYPE = "t4g.nano"
API_PORT = 443
# AL2023's root device; 8 GiB is the size of its standard AMI's root snapshot (docs/first-deploy.md checks it).
ROOT_DEVICE = "/dev/xvda"
ROOT_VOLUME_GIB = 8
ROOT_VOLUME_TYPE = ec2.EbsDeviceVolumeType.GP3
SSM_POLICY = "AmazonSSMManagedInstanceCore"


class KubectlTunnel(Construct):
    """An SSM-managed relay to the cluster endpoint: no inbound ports, IMDSv2 only, an encrypted root volume."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.Cluster, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="kubectl tunnel: no inbound; HTTPS out to Session Manager and the EKS API endpoint",
            allow_all_outbound=False,
        )
        # Session Manager's endpoints are public AWS endpoints (through the NAT); the API endpoint is in the VPC.
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(API_PORT), "HTTPS to Session Manager and the EKS API endpoint"
        )
        ec2.CfnSecurityGroupIngress(
            self,
            "ToApiEndpoint",
            group_id=cluster.cluster_security_group_id,
            source_security_group_id=self.security_group.security_group_id,
            ip_protocol="tcp",
            from_port=API_PORT,
            to_port=API_PORT,
            description="kubectl tunnel to the private API endpoint",
        )
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="kubectl tunnel: registers with Systems Manager for Session Manager port forwarding only",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(SSM_POLICY)],
        )
        self.instance = ec2.Instance(
            self,
            "Instance",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            instance_type=ec2.InstanceType(INSTANCE_TYPE),
            # AL2023's standard edition ships the SSM agent, which is all this instance runs.
            machine_image=ec2.MachineImage.latest_amazon_linux2023(cpu_type=ec2.AmazonLinuxCpuType.ARM_64),
            security_group=self.security_group,
            role=role,
            require_imdsv2=True,
            associate_public_ip_address=False,
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(ROOT_VOLUME_GIB, encrypted=True, volume_type=ROOT_VOLUME_TYPE),
                )
            ],
        )
        self._acknowledge(role)

    def _acknowledge(self, role: iam.Role) -> None:
        acknowledge(
            role,
            f"IAM4[{MANAGED_POLICY}{SSM_POLICY}]",
            "the policy AWS documents for a Session Manager managed instance: the agent's own registration and "
            "message channels, nothing else in the account",
        )
        acknowledge(
            self.instance,
            "EC28",
            "a relay for interactive kubectl sessions: one-minute detailed monitoring would bill for nothing watched",
        )
        acknowledge(
            self.instance,
            "EC29",
            "a stateless relay the stack can recreate at any time: nothing on it to protect from termination",
        )
