"""How long the deploy may wait on anything, inside what CloudFormation and its Lambdas allow.

CloudFormation waits at most one hour for a custom resource to answer (AWS::CloudFormation::CustomResource
`ServiceTimeout`: 1 to 3600 seconds, default 3600; CloudFormation User Guide / aws-cdk-lib 2.275
CfnCustomResourceProps), and a Lambda that waits inside one invocation dies at its own timeout
without answering: the aws-eks-v2 kubectl provider's Handler (KubernetesManifest, HelmChart,
KubernetesObjectValue) has 15 minutes (aws-cdk v2.275.0,
packages/aws-cdk-lib/aws-eks-v2/lib/kubectl-provider.ts). Every wait here ends early enough to
report its own failure; tests/cdk/test_deploy_time_limits.py checks the synthesized templates.
"""

from __future__ import annotations

import math
from typing import Final

from aws_cdk import Duration

# The ALB hostname wait (KubernetesObjectValue): the controller creates an ALB in a few minutes once
# its subnets and log bucket are right; 3 minutes stay for the handler to report a wait that ended.
HOSTNAME_WAIT: Final = Duration.minutes(12)
# A Helm install/upgrade with --wait, run by the same 15-minute handler (helm's --timeout).
HELM_WAIT: Final = Duration.minutes(12)
# An image build's own limits in CodeBuild (a Neuron image takes 15-30 minutes). The queue limit
# replaces CodeBuild's default of 8 hours, so that the deploy can outwait any build it starts.
IMAGE_BUILD_TIMEOUT: Final = Duration.minutes(90)
SMALL_IMAGE_BUILD_TIMEOUT: Final = Duration.minutes(20)  # the routing controller's, each workload's own
IMAGE_BUILD_QUEUE_TIMEOUT: Final = Duration.minutes(60)
# One image-build wait resource's waiter (provider framework state machine): ends before CloudFormation's hour.
IMAGE_BUILD_WAIT: Final = Duration.minutes(50)
# Each wait resource's is-complete handler stops this long after its start, before its waiter's end,
# and hands on to the next resource of the chain (the last one reports the still-running builds).
IMAGE_BUILD_REPORT_AFTER: Final = Duration.minutes(45)
# Enough wait resources that the chain outlasts the longest build: queued, then built to its timeout,
# plus a margin for the provisioning and upload phases around it.
IMAGE_BUILD_MARGIN: Final = Duration.minutes(15)
IMAGE_BUILD_WAIT_STAGES: Final = math.ceil(
    sum(d.to_minutes() for d in (IMAGE_BUILD_QUEUE_TIMEOUT, IMAGE_BUILD_TIMEOUT, IMAGE_BUILD_MARGIN))
    / IMAGE_BUILD_REPORT_AFTER.to_minutes()
)
# The weights staging build (a few GB from the Hub) ends within this, before its waiter does, so the
# failure the deploy reports is CodeBuild's, with its log link.
STAGING_BUILD: Final = Duration.minutes(45)
STAGING_WAIT: Final = Duration.minutes(55)
