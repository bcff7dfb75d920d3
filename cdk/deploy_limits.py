"""How long the deploy may wait on anything, inside what CloudFormation and its Lambdas allow.

CloudFormation waits at most one hour for a custom resource to answer (AWS::CloudFormation::CustomResource
`ServiceTimeout`: 1 to 3600 seconds, default 3600; CloudFormation User Guide / aws-cdk-lib 2.275
CfnCustomResourceProps), and a Lambda that waits inside one invocation dies at its own timeout
without answering. Every wait here ends early enough to report its own failure.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration

CUSTOM_RESOURCE_LIMIT: Final = Duration.hours(1)
# The aws-eks-v2 kubectl provider's Handler function (KubernetesManifest, HelmChart,
# KubernetesObjectValue) runs with a 15-minute timeout and waits inside one invocation
# (aws-cdk v2.275.0, packages/aws-cdk-lib/aws-eks-v2/lib/kubectl-provider.ts).
KUBECTL_HANDLER_TIMEOUT: Final = Duration.minutes(15)
# Left to a waiting Lambda after its wait, to run kubectl once more and answer CloudFormation.
LAMBDA_MARGIN: Final = Duration.minutes(3)
# The ALB hostname wait: the controller creates an ALB in a few minutes once its subnets and log
# bucket are right; a wait that ends leaves the Lambda time to say so.
HOSTNAME_WAIT: Final = Duration.minutes(12)
# A Helm install/upgrade with --wait, run by the same handler (helm's --timeout).
HELM_WAIT: Final = Duration.minutes(12)
# The image builds' waiter (provider framework state machine): ends before CloudFormation's hour so
# the handler's own message ("still running, re-run the deploy") reaches the stack events.
IMAGE_BUILD_WAIT: Final = Duration.minutes(50)
# The is-complete handler gives up this long after the builds started, before the waiter's end.
IMAGE_BUILD_REPORT_AFTER: Final = Duration.minutes(45)
