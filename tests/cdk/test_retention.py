"""What is kept to protect data is kept on stack delete and replacement, never after a failed first create.

CloudFormation's plain `Retain` keeps a resource even when the create that made it rolls back, so each
failed first deploy would leave empty keys, log groups, buckets and a user pool behind
(cdk/retention.py). Walks every template of both synths, so a new resource with a default `Retain`
(kms.Key, s3.Bucket, logs.LogGroup, cognito.UserPool all default to it) is caught too.
"""

from __future__ import annotations

import json

import pytest

from cdk.constructs.build_runner import LAMBDAS_DIR
from lambdas.empty_on_create_rollback import MARGIN_S
from tests.cdk.conftest import as_list, resources_of
from tests.cdk.manifests import render

# (stack, resource type) -> why a plain Retain is right there. Nothing needs one today.
PLAIN_RETAIN_REASONS: dict[tuple[str, str], str] = {}
# What the default synth retains (modelStoreRemovalPolicy=retain in cdk.json): each must be there.
RETAINED_KINDS = {"AWS::KMS::Key", "AWS::S3::Bucket", "AWS::Logs::LogGroup", "AWS::Cognito::UserPool"}


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_nothing_is_retained_after_its_first_create_fails(fixture, request):
    synth = request.getfixturevalue(fixture)
    plain = [
        (stack, logical_id, resource["Type"])
        for stack, template in synth.raw_templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource.get("DeletionPolicy") == "Retain" and (stack, resource["Type"]) not in PLAIN_RETAIN_REASONS
    ]
    assert not plain, f"retained even when their first create rolls back: {plain}"


def test_retained_data_outlives_stack_delete_and_replacement(platform_synth):
    retained = {
        resource["Type"]: resource.get("UpdateReplacePolicy")
        for template in platform_synth.raw_templates.values()
        for resource in template["Resources"].values()
        if resource.get("DeletionPolicy") == "RetainExceptOnCreate"
    }
    assert set(retained) >= RETAINED_KINDS
    assert set(retained.values()) == {"Retain"}


def _statements(template, function_logical_id):
    """(actions, resources) of each statement in the policies attached to a function's role."""
    role = template["Resources"][function_logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                yield as_list(statement["Action"]), as_list(statement["Resource"])


def _granted(grants, action):
    """The resources (as JSON) that statements granting `action` name."""
    return [json.dumps(r, sort_keys=True) for actions, resources in grants if action in actions for r in resources]


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_a_rolled_back_create_can_delete_its_buckets(fixture, request):
    """CloudFormation cannot delete a bucket holding objects; each bucket is emptied by a custom resource
    that a rollback deletes before it, and that only the writers' rollback precedes."""
    synth = request.getfixturevalue(fixture)
    checked = 0
    for stack, template in synth.raw_templates.items():
        buckets = set(resources_of(template, "AWS::S3::Bucket"))
        if not buckets:
            continue
        emptiers = resources_of(template, "Custom::EmptyOnCreateRollback")
        assert len(emptiers) == 1, f"{stack} has buckets {sorted(buckets)} but nothing empties them"
        ((emptier_id, emptier),) = emptiers.items()
        props = emptier["Properties"]
        data = {ref["Ref"] for ref in props["Buckets"]}
        log_bucket = props["LogBucket"]["Ref"]
        assert data | {log_bucket} == buckets, stack
        assert log_bucket not in data, stack
        # Every bucket that logs into the log bucket is one whose logging the emptier turns off first.
        logging_into = {
            k: r["Properties"]["LoggingConfiguration"]["DestinationBucketName"]
            for k, r in resources_of(template, "AWS::S3::Bucket").items()
            if "LoggingConfiguration" in r["Properties"]
        }
        assert set(logging_into) <= data, stack
        assert all(target == {"Ref": log_bucket} for target in logging_into.values()), stack
        # Its handler may read the stack's status, turn off the data buckets' access logging and delete
        # every bucket's object versions: nothing else, nowhere else.
        functions = resources_of(template, "AWS::Lambda::Function")
        handler = next(
            k for k, f in functions.items() if f["Properties"].get("Handler") == "empty_on_create_rollback.on_event"
        )
        grants = list(_statements(template, handler))
        assert (["cloudformation:DescribeStacks"], [{"Ref": "AWS::StackId"}]) in grants
        assert sorted(_granted(grants, "s3:PutBucketLogging")) == sorted(
            json.dumps({"Fn::GetAtt": [b, "Arn"]}) for b in data
        )
        assert sorted(_granted(grants, "s3:ListBucketVersions")) == sorted(
            json.dumps({"Fn::GetAtt": [b, "Arn"]}) for b in buckets
        )
        assert len(_granted(grants, "s3:DeleteObjectVersion")) == len(buckets)
        assert {a for actions, _ in grants for a in actions} == {
            "cloudformation:DescribeStacks",
            "s3:PutBucketLogging",
            "s3:ListBucketVersions",
            "s3:DeleteObjectVersion",
        }
        # The log bucket stays empty for longer than the ALB's 5-minute log interval, and the handler
        # has the time to see it, and answers before the provider framework's Lambda that waits on it dies.
        quiet_s, poll_s = float(props["QuietSeconds"]), float(props["PollSeconds"])
        timeout_s = functions[handler]["Properties"]["Timeout"]
        framework_s = functions[props["ServiceToken"]["Fn::GetAtt"][0]]["Properties"]["Timeout"]
        assert quiet_s > 300
        assert quiet_s + poll_s + MARGIN_S < timeout_s < framework_s
        # What writes to the buckets during a create is deleted before the emptier runs.
        namespace = next(
            r
            for r in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values()
            if any(m["kind"] == "Namespace" for m in json.loads(render(r["Properties"]["Manifest"])))
        )
        assert emptier_id in namespace.get("DependsOn", [])
        for staging in resources_of(template, "Custom::ModelStaging").values():
            assert emptier_id in staging.get("DependsOn", [])
        checked += 1
    assert checked


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_our_lambdas_log_to_a_log_group_of_their_stack(fixture, request):
    """Lambda's default log group (/aws/lambda/<function>) is made by Lambda, not CloudFormation: it
    outlives every rolled-back create, one more per try (function names are generated)."""
    synth = request.getfixturevalue(fixture)
    ours = LAMBDAS_DIR.glob("*.py")
    modules = {path.stem for path in ours if path.stem != "__init__"}
    checked = 0
    for template in synth.raw_templates.values():
        groups = resources_of(template, "AWS::Logs::LogGroup")
        for logical_id, function in resources_of(template, "AWS::Lambda::Function").items():
            if str(function["Properties"].get("Handler", "")).split(".")[0] not in modules:
                continue
            group = function["Properties"].get("LoggingConfig", {}).get("LogGroup", {})
            assert group.get("Ref") in groups, logical_id
            checked += 1
    assert checked
