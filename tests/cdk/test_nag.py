"""cdk-nag runs on every synth (an unacknowledged finding fails the synth fixture itself); here we
check that it really ran, that every acknowledgement has a specific reason, and our own EKS checks."""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_eks as eks_l1

from cdk.platform_checks import cluster_problems


def _report(synth):
    return json.loads((synth.outdir / "validation-report.json").read_text())


def test_cdk_nag_ran_with_no_open_findings(platform_synth, variant_synth):
    for synth in (platform_synth, variant_synth):
        (report,) = [r for r in _report(synth)["pluginReports"] if r["pluginName"] == "AwsSolutions"]
        assert report["conclusion"] == "success"
        assert report["violations"] == []
        assert len(report["suppressedViolations"]) > 20  # it did look at our resources


def test_every_acknowledgement_has_a_specific_reason(platform_synth):
    (report,) = [r for r in _report(platform_synth)["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    reasons = {v["reason"] for v in report["suppressedViolations"]}
    for reason in reasons:
        assert len(reason) >= 40, reason
    # Rules are acknowledged one finding at a time, never a bare rule id for IAM5/IAM4.
    for violation in report["suppressedViolations"]:
        if violation["ruleName"].startswith(("AwsSolutions-IAM5", "AwsSolutions-IAM4")):
            assert "[" in violation["acknowledgedId"]


def _cluster(**vpc_config):
    stack = cdk.Stack()
    return eks_l1.CfnCluster(
        stack,
        "Cluster",
        role_arn="arn:aws:iam::123456789012:role/eks",
        resources_vpc_config=eks_l1.CfnCluster.ResourcesVpcConfigProperty(subnet_ids=["subnet-1"], **vpc_config),
        logging=eks_l1.CfnCluster.LoggingProperty(
            cluster_logging=eks_l1.CfnCluster.ClusterLoggingProperty(
                enabled_types=[eks_l1.CfnCluster.LoggingTypeConfigProperty(type=t) for t in ("api", "audit")]
            )
        ),
    )


def test_own_checks_flag_missing_logs_and_open_endpoints():
    problems = cluster_problems(_cluster(endpoint_public_access=True, endpoint_private_access=False))
    assert any("authenticator" in p for p in problems)
    assert any("private API endpoint" in p for p in problems)
    assert any("0.0.0.0/0" in p for p in problems)


def test_own_checks_pass_the_synthesized_cluster(platform_synth, variant_synth):
    for synth in (platform_synth, variant_synth):
        manifest = json.loads((synth.outdir / "manifest.json").read_text())
        metadata = manifest["artifacts"]["SdOnEksCluster"].get("metadata", {})
        errors = [m for entries in metadata.values() for m in entries if m["type"] == "aws:cdk:error"]
        assert errors == []
