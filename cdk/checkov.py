"""Checkov suppressions, written next to the resource they are about, each with its reason.

`make test` runs Checkov on the synthesized templates and on the Kubernetes objects inside them
(tests/cdk/test_checkov.py); a finding fails the suite unless it is fixed or suppressed here with
a reason, the way cdk-nag acknowledgements are. CloudFormation reads suppressions from a resource's
`Metadata.checkov.skip`; Kubernetes from `checkov.io/skip<n>: <id>=<reason>` annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import aws_cdk as cdk
import jsii
from constructs import IConstruct

# Every Lambda function in this app is a deploy-time custom-resource handler (ours in lambdas/, or
# one aws-cdk-lib creates for its own constructs); tests/cdk/test_checkov.py checks that each one is
# the ServiceToken of a custom resource or of a provider framework, so these reasons stay true.
CUSTOM_RESOURCE_HANDLER_SKIPS: Final[Mapping[str, str]] = {
    "CKV_AWS_115": "Custom-resource handler invoked a few times per deploy by CloudFormation; a reserved "
    "concurrency limit would only take capacity from the account pool.",
    "CKV_AWS_116": "Custom-resource handler invoked synchronously by CloudFormation or the provider framework's "
    "state machine, which records and reports every failure; a DLQ applies to asynchronous invocations only.",
    "CKV_AWS_117": "Custom-resource handler that calls AWS APIs only; outside a VPC it needs no NAT route or "
    "VPC endpoints, and it exposes no network listener.",
    "CKV_AWS_173": "Environment holds function ARNs and flags, no secrets; Lambda encrypts it at rest with the "
    "AWS-managed key.",
}


def skip_cfn(resource: cdk.CfnResource, checks: Mapping[str, str]) -> None:
    """Suppress Checkov `checks` ({id: reason}) on one CloudFormation resource."""
    existing = resource.get_metadata("checkov") or {}
    skips = list(existing.get("skip", []))
    known = {s["id"] for s in skips}
    skips += [{"id": check, "comment": reason} for check, reason in checks.items() if check not in known]
    resource.add_metadata("checkov", {"skip": skips})


def skip_cfn_child(construct: IConstruct, checks: Mapping[str, str]) -> None:
    """Suppress `checks` on a construct's own CloudFormation resource (its default child)."""
    child = construct.node.default_child
    if not isinstance(child, cdk.CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to annotate")
    skip_cfn(child, checks)


def k8s_skip_annotations(checks: Mapping[str, str]) -> dict[str, str]:
    """Annotations that suppress Checkov `checks` on a Kubernetes object.

    Checkov splits the annotation value at '=', so a reason must not contain one.
    """
    annotations = {}
    for index, (check, reason) in enumerate(sorted(checks.items()), start=1):
        if "=" in reason:
            raise ValueError(f"the reason for {check} must not contain '='")
        annotations[f"checkov.io/skip{index}"] = f"{check}={reason}"
    return annotations


@jsii.implements(cdk.IAspect)
class CustomResourceHandlerSkips:
    """Adds CUSTOM_RESOURCE_HANDLER_SKIPS to every Lambda function (all are custom-resource handlers)."""

    def visit(self, node: IConstruct) -> None:
        """Annotate each AWS::Lambda::Function (aws-cdk-lib's own handlers are plain CfnResources)."""
        if isinstance(node, cdk.CfnResource) and node.cfn_resource_type == "AWS::Lambda::Function":
            skip_cfn(node, CUSTOM_RESOURCE_HANDLER_SKIPS)
