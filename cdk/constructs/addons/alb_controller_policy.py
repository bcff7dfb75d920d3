"""The AWS Load Balancer Controller's published IAM policy, read from the pinned aws-cdk-lib.

aws-cdk-lib ships the policy of each controller release it knows (aws-eks-v2/lib/addons/
alb-iam_policy-<version>.json, byte-identical to kubernetes-sigs/aws-load-balancer-controller@v3.2.2
docs/install/iam_policy.json). Its AlbController construct can only bind it through IRSA, so the
controller is installed by our own construct (load_balancer_controller.py) and the policy is read
here from the installed package: the same statements as before, and a bump of aws-cdk-lib or of
versions.ALB_CONTROLLER_VERSION keeps them in step with no copy to maintain.
"""

from __future__ import annotations

import functools
import json
import tarfile
from importlib import metadata, resources
from typing import Any

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

# The jsii assembly aws-cdk-lib's Python package carries (aws_cdk/_jsii/aws-cdk-lib@<version>.jsii.tgz).
_ASSEMBLY_PACKAGE = "aws_cdk._jsii"
_POLICY_MEMBER = "package/aws-eks-v2/lib/addons/alb-iam_policy-{version}.json"


@functools.cache
def published_policy(version: str) -> dict[str, Any]:
    """The policy document aws-cdk-lib ships for controller `version` (for example "v3.2.2")."""
    cdk_version = metadata.version("aws-cdk-lib")
    assembly = resources.files(_ASSEMBLY_PACKAGE) / f"aws-cdk-lib@{cdk_version}.jsii.tgz"
    member = _POLICY_MEMBER.format(version=version)
    with resources.as_file(assembly) as path, tarfile.open(path) as archive:
        try:
            extracted = archive.extractfile(member)
        except KeyError:
            extracted = None
        if extracted is None:
            raise ValueError(
                f"aws-cdk-lib {cdk_version} ships no IAM policy for the load balancer controller {version} "
                f"({member}): set versions.ALB_CONTROLLER_VERSION to a release it ships (AlbControllerVersion)"
            )
        return json.loads(extracted.read())


def controller_statements(version: str) -> list[iam.PolicyStatement]:
    """The published statements, with `arn:aws:` made partition-neutral as aws-cdk-lib's AlbController does."""
    statements = []
    for statement in published_policy(version)["Statement"]:
        resource = statement.get("Resource")
        if resource is not None:
            resource = [_partition(r) for r in resource] if isinstance(resource, list) else _partition(resource)
            statement = {**statement, "Resource": resource}
        statements.append(iam.PolicyStatement.from_json(statement))
    return statements


def _partition(arn: str) -> str:
    return arn.replace("arn:aws:", f"arn:{Aws.PARTITION}:", 1)
