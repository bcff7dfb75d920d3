"""An IAM role bound to one Kubernetes service account through EKS Pod Identity."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


class PodIdentityRole(Construct):
    """A role only the named service account can assume, and the association that binds them.

    The association needs no service account to exist yet, so a Helm chart can create its own
    service account; the pod identity agent hands the role's credentials to its pods.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service_account: str,
        description: str,
        statements: Sequence[iam.PolicyStatement] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            # Pod Identity needs sts:TagSession as well as sts:AssumeRole.
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL)),
            # An inline policy lives and dies with the role: no separate policy to attach elsewhere.
            inline_policies={"access": iam.PolicyDocument(statements=list(statements))} if statements else None,
        )
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "Association",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )
