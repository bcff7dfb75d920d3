"""The cluster checks over the stand-in kubectl (and moto's ECR for the images): a healthy cluster passes each,
the one thing each guards against fails it."""

from __future__ import annotations

import json

import boto3

from cdk import versions
from tests.verify.conftest import NAMESPACE, OUTPUTS, REGION, REPOSITORY, REPOSITORY_URI, deployment, pod, run, stubbed
from verify import platform
from verify.result import Status
from verify.stacks import ADDITIONS, CLUSTER


def push(tag: str) -> str:
    """Push an image with `tag` to the stack's repository in moto; its digest."""
    ecr = boto3.client("ecr", region_name=REGION)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "digest": "sha256:" + "a" * 64,
            "size": 1,
            "mediaType": "application/vnd.docker.container.image.v1+json",
        },
        "layers": [{"digest": "sha256:" + tag.encode().hex().ljust(64, "0")[:64], "size": 1, "mediaType": "x"}],
    }
    return str(
        ecr.put_image(repositoryName=REPOSITORY, imageManifest=json.dumps(manifest), imageTag=tag)["image"]["imageId"][
            "imageDigest"
        ]
    )


def test_the_deployments_images_are_in_ecr_and_the_pods_run_them(aws, cluster, make_context):
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName=REPOSITORY)
    digest = push("nvidia-abc")
    image = f"{REPOSITORY_URI}:nvidia-abc"
    cluster.add("deployments", deployment("sd-gpu", (image,)))
    cluster.add("pods", pod("sd-gpu-1", image=image, image_id=f"{REPOSITORY_URI}@{digest}"))

    found = run(platform.images_pulled, make_context())
    assert found.status == Status.PASS and "nvidia-abc" in found.evidence


def test_an_image_missing_from_ecr_fails(aws, cluster, make_context):
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName=REPOSITORY)
    push("nvidia-abc")
    cluster.add("deployments", deployment("sd-gpu", (f"{REPOSITORY_URI}:nvidia-new",)))

    missing = run(platform.images_pulled, make_context())
    assert missing.status == Status.FAIL and missing.evidence == "not in ECR: nvidia-new"


def test_a_pod_running_another_digest_fails(aws, cluster, make_context):
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName=REPOSITORY)
    push("nvidia-abc")
    image = f"{REPOSITORY_URI}:nvidia-abc"
    cluster.add("deployments", deployment("sd-gpu", (image,)))
    cluster.add("pods", pod("sd-gpu-1", image=image, image_id=f"{REPOSITORY_URI}@sha256:{'f' * 64}"))

    other = run(platform.images_pulled, make_context())
    assert other.status == Status.FAIL and "sd-gpu-1/app runs sha256:fff" in other.evidence


def test_ready_read_only_pods_pass_and_job_pods_are_left_out(cluster, make_context):
    cluster.add(
        "pods", pod("sd-gpu-1"), pod("sd-neuron-1"), pod("compile-x", ready=False, read_only=False, owner="Job")
    )

    ok = run(platform.pods_ready_read_only, make_context())
    assert ok.status == Status.PASS and ok.evidence == "2 pods Ready, read-only root"


def test_a_pod_not_ready_or_with_a_writable_root_fails(cluster, make_context):
    cluster.add("pods", pod("sd-gpu-1", ready=False), pod("llm-gpu-1", read_only=False))

    bad = run(platform.pods_ready_read_only, make_context())
    assert bad.status == Status.FAIL
    assert bad.evidence == "not Ready: sd-gpu-1; writable root: llm-gpu-1/app"


def test_no_pods_at_all_fails(cluster, make_context):
    assert run(platform.pods_ready_read_only, make_context()).status == Status.FAIL


def test_the_image_pods_carry_pod_identitys_token(cluster, make_context):
    cluster.add("pods", pod("sd-gpu-1"), pod("other", labels={"app": "x"}, volumes=()))
    assert run(platform.pod_identity_token, make_context()).status == Status.PASS

    cluster.add("pods", pod("sd-gpu-2", volumes=("kube-api-access",)))
    without = run(platform.pod_identity_token, make_context())
    assert without.status == Status.FAIL and "sd-gpu-2" in without.evidence


def lbc(image: str, ready: int = 2) -> dict:
    return deployment(platform.LBC_DEPLOYMENT, (image,), ready=ready, replicas=2)


PINNED_LBC = (
    f"{versions.EKS_ADDON_REGISTRIES[REGION]}/"
    f"{versions.ALB_CONTROLLER_IMAGE_REPOSITORY}:{versions.ALB_CONTROLLER_VERSION}"
)


def test_the_load_balancer_controller_runs_the_regions_image(cluster, make_context):
    cluster.add("deployments", lbc(PINNED_LBC), namespace="kube-system")
    ok = run(platform.load_balancer_controller, make_context())
    assert ok.status == Status.PASS and ok.evidence.endswith("2/2 ready")


def test_the_load_balancer_controller_from_another_region_or_not_ready_fails(cluster, make_context):
    other = PINNED_LBC.replace(REGION, "us-west-2")
    cluster.add("deployments", lbc(other), namespace="kube-system")
    assert run(platform.load_balancer_controller, make_context()).evidence == f"runs {other}"

    cluster.state["resources"]["kube-system"]["deployments"] = [lbc(PINNED_LBC, ready=1)]
    cluster.save()
    assert run(platform.load_balancer_controller, make_context()).status == Status.FAIL


def test_karpenter_is_not_denied(cluster, make_context):
    cluster.state["container_logs"]["kube-system/deployment/karpenter"] = '{"level":"INFO","message":"launched"}\n'
    cluster.save()
    assert run(platform.karpenter_not_denied, make_context()).evidence == "0 AccessDenied lines"

    cluster.state["container_logs"]["kube-system/deployment/karpenter"] = "x AccessDenied: ec2:RunInstances\nok\n"
    cluster.save()
    assert run(platform.karpenter_not_denied, make_context()).status == Status.FAIL


def test_without_karpenter_the_check_skips(cluster, make_context):
    assert run(platform.karpenter_not_denied, make_context()).status == Status.SKIP


def scaled_object(name: str, ready: str = "True") -> dict:
    conditions = [{"type": "Ready", "status": ready}, {"type": "Active", "status": "False"}]
    return {"metadata": {"name": name}, "status": {"hpaName": f"keda-hpa-{name}", "conditions": conditions}}


def hpa(name: str, *values: str | None) -> dict:
    metrics = [{"type": "External", "external": {"current": {"averageValue": v} if v else {}}} for v in values]
    return {"metadata": {"name": f"keda-hpa-{name}"}, "status": {"currentMetrics": metrics}}


def test_keda_ready_with_current_metric_values_passes(cluster, make_context):
    cluster.add("scaledobjects.keda.sh", scaled_object("sd-gpu"))
    cluster.add("horizontalpodautoscalers", hpa("sd-gpu", "0", "2"))

    ok = run(platform.keda_triggers, make_context())
    assert ok.status == Status.PASS and ok.evidence == "sd-gpu Active False [0, 2]"


def test_keda_not_ready_or_without_a_metric_value_fails(cluster, make_context):
    cluster.add("scaledobjects.keda.sh", scaled_object("sd-gpu"), scaled_object("sd-neuron", ready="False"))
    cluster.add("horizontalpodautoscalers", hpa("sd-gpu", "0", None))

    bad = run(platform.keda_triggers, make_context())
    assert bad.status == Status.FAIL
    assert "sd-gpu: keda-hpa-sd-gpu has no current value for 1 metric(s)" in bad.evidence
    assert "sd-neuron Ready False" in bad.evidence


def test_the_network_policies_are_in_place(cluster, make_context):
    cluster.add("networkpolicies", {"metadata": {"name": "default-deny-ingress"}})
    missing = run(platform.network_policies, make_context())
    assert missing.status == Status.FAIL and "allow-service-port-from-load-balancer" in missing.evidence

    cluster.add("networkpolicies", {"metadata": {"name": "allow-service-port-from-load-balancer"}})
    assert run(platform.network_policies, make_context()).status == Status.PASS


def test_kubectl_is_asked_in_the_serving_namespace(cluster, make_context):
    run(platform.pods_ready_read_only, make_context())
    assert cluster.calls()[-1][:3] == ["--namespace", NAMESPACE, "get"]


def spot_resources(status: str) -> dict:
    summary = {
        "LogicalResourceId": "SpotServiceLinkedRoleResource1A2B3C",
        "PhysicalResourceId": "x",
        "ResourceType": "Custom::SpotServiceLinkedRole",
        "LastUpdatedTimestamp": "2026-01-01T00:00:00Z",
        "ResourceStatus": status,
    }
    return {"StackResourceSummaries": [summary]}


def test_the_spot_role_exists_where_the_stack_asked_for_it(aws, make_context):
    cfn, stub = stubbed("cloudformation")
    for answer in (
        spot_resources("CREATE_COMPLETE"),
        spot_resources("CREATE_FAILED"),
        spot_resources("CREATE_COMPLETE"),
    ):
        stub.add_response("list_stack_resources", answer, {"StackName": CLUSTER})
    stub.add_response("list_stack_resources", {"StackResourceSummaries": []}, {"StackName": CLUSTER})
    ctx = make_context(clients={"cloudformation": cfn})

    no_role = run(platform.spot_role, ctx)
    assert no_role.status == Status.FAIL and "NoSuchEntity" in no_role.evidence
    assert run(platform.spot_role, ctx).evidence == "SpotServiceLinkedRoleResource1A2B3C CREATE_FAILED"
    trust = {
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "spot.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    }
    boto3.client("iam").create_role(RoleName="AWSServiceRoleForEC2Spot", AssumeRolePolicyDocument=json.dumps(trust))
    assert run(platform.spot_role, ctx).status == Status.PASS
    assert run(platform.spot_role, ctx).status == Status.SKIP


TUNNEL = "i-0123456789abcdef0"


def test_the_kubectl_tunnel_is_online_in_systems_manager_and_skips_where_it_is_off(make_context):
    outputs = json.loads(json.dumps(OUTPUTS))
    outputs[CLUSTER]["KubectlTunnelInstanceId"] = TUNNEL
    ssm, stub = stubbed("ssm")
    request = {"Filters": [{"Key": "InstanceIds", "Values": [TUNNEL]}]}
    for answer in (
        [{"InstanceId": TUNNEL, "PingStatus": "Online"}],
        [{"InstanceId": TUNNEL, "PingStatus": "ConnectionLost"}],
        [],
    ):
        stub.add_response("describe_instance_information", {"InstanceInformationList": answer}, request)
    ctx = make_context(outputs=outputs, clients={"ssm": ssm})

    online = run(platform.kubectl_tunnel, ctx)
    assert (online.status, online.evidence) == (Status.PASS, f"{TUNNEL} PingStatus Online")
    assert run(platform.kubectl_tunnel, ctx).status == Status.FAIL
    unregistered = run(platform.kubectl_tunnel, ctx)
    assert unregistered.status == Status.FAIL and "not registered" in unregistered.evidence
    stub.assert_no_pending_responses()
    assert run(platform.kubectl_tunnel, make_context()).status == Status.SKIP


def lbc_pod(name: str, *, volumes: tuple[str, ...] = ("eks-pod-identity-token",)) -> dict:
    return pod(name, labels={"app.kubernetes.io/name": "aws-load-balancer-controller"}, volumes=volumes)


def lbc_associations(stub, associations: list[dict]) -> None:
    stub.add_response(
        "list_pod_identity_associations",
        {"associations": associations},
        {
            "clusterName": OUTPUTS[CLUSTER]["ClusterName"],
            "namespace": "kube-system",
            "serviceAccount": "aws-load-balancer-controller",
        },
    )


LBC_ASSOCIATION = {
    "clusterName": "sd-on-eks",
    "namespace": "kube-system",
    "serviceAccount": "aws-load-balancer-controller",
    "associationId": "a-0123456789abcdef0",
}


def test_the_load_balancer_controller_has_its_association_and_its_pods_the_token(cluster, make_context):
    cluster.add("pods", lbc_pod("lbc-1"), lbc_pod("lbc-2"), namespace="kube-system")
    eks, stub = stubbed("eks")
    lbc_associations(stub, [LBC_ASSOCIATION])

    ok = run(platform.load_balancer_controller_pod_identity, make_context(clients={"eks": eks}))
    assert ok.status == Status.PASS and ok.evidence == "a-0123456789abcdef0; eks-pod-identity-token on 2 pods"
    stub.assert_no_pending_responses()


def test_a_load_balancer_controller_without_an_association_fails(cluster, make_context):
    cluster.add("pods", lbc_pod("lbc-1"), namespace="kube-system")
    eks, stub = stubbed("eks")
    lbc_associations(stub, [])

    missing = run(platform.load_balancer_controller_pod_identity, make_context(clients={"eks": eks}))
    assert missing.status == Status.FAIL
    assert missing.evidence == "no Pod Identity association for kube-system/aws-load-balancer-controller"


def test_controller_pods_started_before_the_association_fail_naming_the_rollout(cluster, make_context):
    # An upgrade from IRSA whose pods were not rolled: no Pod Identity token in the old pod.
    cluster.add("pods", lbc_pod("lbc-new"), lbc_pod("lbc-old", volumes=("aws-iam-token",)), namespace="kube-system")
    eks, stub = stubbed("eks")
    lbc_associations(stub, [LBC_ASSOCIATION])

    stale = run(platform.load_balancer_controller_pod_identity, make_context(clients={"eks": eks}))
    assert stale.status == Status.FAIL and "lbc-old" in stale.evidence and "lbc-new" not in stale.evidence
    assert "rollout restart deployment/aws-load-balancer-controller -n kube-system" in stale.evidence


def test_on_a_teams_cluster_the_checks_of_our_own_cluster_stack_skip_with_the_reason(make_context):
    # existingClusterName: the additions stack stands where the network and cluster stacks are.
    outputs = {name: values for name, values in OUTPUTS.items() if name != CLUSTER}
    outputs[ADDITIONS] = {"ClusterName": "team-cluster", "ExpectedPrerequisites": "karpenter, load-balancer-controller"}
    ctx = make_context(outputs=outputs)
    assert ctx.on_team_cluster and ctx.cluster_name() == "team-cluster"
    for check, reason in (
        (platform.spot_role, "Spot role is the team's"),
        (platform.kubectl_tunnel, "no kubectl tunnel"),
        (platform.load_balancer_controller_pod_identity, "team's own load balancer controller"),
    ):
        outcome = run(check, ctx)
        assert outcome.status == Status.SKIP and reason in outcome.evidence, (check.__name__, outcome)
