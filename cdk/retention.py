"""What "retained" means for this app's data and audit trail: kept when its stack is deleted or the
resource is replaced, but deleted when the stack operation that created it rolls back.

RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE synthesizes `DeletionPolicy: RetainExceptOnCreate` with
`UpdateReplacePolicy: Retain` (aws-cdk v2.275.0 packages/aws-cdk-lib/core/lib/cfn-resource.ts
applyRemovalPolicy). CloudFormation's RetainExceptOnCreate deletes the resource if the operation that
created it is rolled back, and retains it otherwise (CloudFormation User Guide, DeletionPolicy
attribute). So a failed first deploy leaves no empty keys, log groups, buckets or user pool behind, and
a deployed stack's data outlives `cdk destroy`. tests/cdk/test_retention.py walks every template.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy

RETAINED: Final = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE


def data_removal_policy(retain: bool) -> RemovalPolicy:
    """RETAINED when the user asked to keep the data (`modelStoreRemovalPolicy=retain`), else DESTROY."""
    return RETAINED if retain else RemovalPolicy.DESTROY
