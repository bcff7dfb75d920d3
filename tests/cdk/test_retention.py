"""What is kept to protect data is kept on stack delete and replacement, never after a failed first create.

CloudFormation's plain `Retain` keeps a resource even when the create that made it rolls back, so each
failed first deploy would leave empty keys, log groups, buckets and a user pool behind
(cdk/retention.py). Walks every template of both synths, so a new resource with a default `Retain`
(kms.Key, s3.Bucket, logs.LogGroup, cognito.UserPool all default to it) is caught too.
"""

from __future__ import annotations

import pytest

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
