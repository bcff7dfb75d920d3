"""The names `make verify` copies from modules that import aws-cdk-lib (so that the command starts without a Node
process) are the ones the stacks use."""

from __future__ import annotations

from cdk.constructs import spot_role
from cdk.constructs.addons import load_balancer_controller
from cdk.front_door import sign_in
from cdk.image import workload as image_workload
from cdk.llm import compile_job, workload
from cdk.serving import network_policy
from verify import llm, platform, pools, serving


def test_the_copied_names_are_the_stacks():
    assert platform.SPOT_ROLE_NAME == spot_role.SPOT_ROLE_NAME
    assert platform.LBC_SERVICE_ACCOUNT == load_balancer_controller.SERVICE_ACCOUNT
    assert platform.LBC_DEPLOYMENT == load_balancer_controller.RELEASE  # the chart names it after the release
    assert platform.DENY_INGRESS_NAME == network_policy.DENY_INGRESS_NAME
    assert platform.ALLOW_SERVICE_NAME == network_policy.ALLOW_SERVICE_NAME
    assert serving.CONFIG_MAP_NAME == sign_in.CONFIG_MAP_NAME
    assert llm.ARTIFACTS_ROOT == compile_job.ARTIFACTS_ROOT
    assert dict([llm.LLM_POD_LABEL]) == workload.APP_LABEL
    assert dict([pools.IMAGE_POD_LABEL]) == image_workload.APP_LABEL
