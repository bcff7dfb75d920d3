"""The serving stack's stored and watched state: the staged weights and compiled artifacts with their
completion markers in S3, the dashboards and alarms, the web ACL on the load balancer, and the routing
controllers' admission guard."""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import ClientError

from common.model_store.layout import COMPLETE_MARKER
from verify.context import Context
from verify.kube import KubeError
from verify.platform import serving_pods
from verify.pools import IMAGE_POD_SELECTOR, at_rest
from verify.result import Check, Outcome, Status, failed, passed, skipped, verdict
from verify.stacks import SERVING, stack_resources

# What the guard answers a change it does not allow (cdk/front_door/routing_controller.py's message).
GUARD_DENIAL: Final = "the routing controller may change only the annotation"
# The sign-in settings' ConfigMap (cdk/front_door/sign_in.py; tests/verify/test_names.py holds it to its source).
CONFIG_MAP_NAME: Final = "sd-auth"
# The readiness gate the load balancer controller injects (docs/first-deploy.md's row).
READINESS_GATE_PREFIX: Final = "target-health.elbv2.k8s.aws/"
# An annotation no routing controller may change (docs/first-deploy.md's row).
FORBIDDEN_CHANGE: Final = "alb.ingress.kubernetes.io/scheme=internet-facing"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix ending in '/') of an `s3://bucket/prefix` output."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.rstrip("/") + "/"


def marker_at(ctx: Context, uri: str) -> Outcome:
    """The completion marker under an S3 prefix: PASS with its key, FAIL naming the key that is missing."""
    bucket, prefix = split_s3_uri(uri)
    key = prefix + COMPLETE_MARKER
    try:
        ctx.client("s3").head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        return failed(f"s3://{bucket}/{key}: {exc.response['Error']['Code']}")
    return passed(f"s3://{bucket}/{key}")


def model_weights(ctx: Context) -> Outcome:
    """The staged weights' completion marker (the deploy staged the model: it was present and ungated)."""
    uri = ctx.output(SERVING, "ModelWeightsUri")
    return marker_at(ctx, uri) if uri else failed(f"stack {SERVING} has no ModelWeightsUri output")


def neuron_artifacts(ctx: Context) -> Outcome:
    """Each served size's compiled artifacts and its completion marker: the compile writes one folder per size
    under the prefix (common/model_store/layout.py `shape_prefix`), each with its own marker."""
    uri = ctx.output(SERVING, "NeuronArtifactsUri")
    if uri is None:
        return skipped("no Neuron compile in this stack (no NeuronArtifactsUri output)")
    sizes = (ctx.output(SERVING, "NeuronCompiledSizes") or "").split(",")
    if not any(sizes):
        return failed(f"stack {SERVING} has no NeuronCompiledSizes output (deploy this checkout's stack)")
    bucket, prefix = split_s3_uri(uri)
    found: list[str] = []
    missing: list[str] = []
    for size in sizes:
        folder = f"{prefix}{size}/"
        listed = ctx.client("s3").list_objects_v2(Bucket=bucket, Prefix=folder, MaxKeys=100).get("Contents", [])
        files = [o["Key"] for o in listed if not o["Key"].endswith(COMPLETE_MARKER)]
        marker = marker_at(ctx, f"s3://{bucket}/{folder}")
        if not files or marker.status != Status.PASS:
            missing.append(f"{size}: {len(files)} files, {'a' if marker.status == Status.PASS else 'no'} marker")
        else:
            found.append(f"{size}: {len(files)} files and marker")
    evidence = "; ".join(missing or found) + f" (s3://{bucket}/{prefix})"
    return verdict(not missing, evidence)


def dashboards(ctx: Context) -> Outcome:
    """Every dashboard the serving stack created can be read."""
    names = stack_resources(ctx.client("cloudformation"), SERVING, "AWS::CloudWatch::Dashboard")
    if not names:
        return failed(f"stack {SERVING} has no dashboard")
    for name in names:
        try:
            ctx.client("cloudwatch").get_dashboard(DashboardName=name)
        except ClientError as exc:
            return failed(f"{name}: {exc.response['Error']['Code']}")
    return passed(", ".join(names))


def alarms(ctx: Context) -> Outcome:
    """Every alarm the serving stack created exists; the evidence counts them by state."""
    names = stack_resources(ctx.client("cloudformation"), SERVING, "AWS::CloudWatch::Alarm")
    if not names:
        return failed(f"stack {SERVING} has no alarm")
    found: dict[str, str] = {}
    for start in range(0, len(names), 100):  # DescribeAlarms takes at most 100 names
        answer = ctx.client("cloudwatch").describe_alarms(AlarmNames=names[start : start + 100])
        found |= {a["AlarmName"]: a["StateValue"] for a in answer["MetricAlarms"]}
    missing = [n for n in names if n not in found]
    if missing:
        return failed(f"missing {', '.join(missing)}")
    states = sorted(set(found.values()))
    return passed(f"{len(found)} alarms: " + ", ".join(f"{list(found.values()).count(s)} {s}" for s in states))


def ingress(ctx: Context) -> dict[str, Any]:
    """The serving namespace's Ingress (the stack creates one)."""
    items = ctx.kube.items("ingresses")
    if not items:
        raise KubeError(f"no Ingress in namespace {ctx.kube.namespace}")
    return items[0]


def load_balancer_arn(ctx: Context, hostname: str) -> str | None:
    """The ARN of the load balancer whose DNS name is the Ingress's hostname."""
    for page in ctx.client("elbv2").get_paginator("describe_load_balancers").paginate():
        for lb in page["LoadBalancers"]:
            if lb["DNSName"].lower() == hostname.lower():
                return str(lb["LoadBalancerArn"])
    return None


def web_acl_on_alb(ctx: Context) -> Outcome:
    """A web ACL (its rate rule and managed rule sets, the body limit) guards the Ingress's load balancer."""
    arn, hostname = load_balancer(ctx)
    if arn is None:
        return failed(f"no load balancer for the Ingress ({hostname or 'no hostname'})")
    acl = ctx.client("wafv2").get_web_acl_for_resource(ResourceArn=arn).get("WebACL")
    return verdict(acl is not None, f"web ACL {acl['Name']}" if acl else f"no web ACL on {arn.rpartition('/')[0]}")


def load_balancer(ctx: Context) -> tuple[str | None, str]:
    """(ARN, or None where there is none, and the Ingress's hostname) of the Ingress's load balancer."""
    entries = ingress(ctx).get("status", {}).get("loadBalancer", {}).get("ingress", [])
    hostname = entries[0].get("hostname", "") if entries else ""
    return (load_balancer_arn(ctx, hostname) if hostname else None), hostname


def alb_access_logs(ctx: Context) -> Outcome:
    """The load balancer writes access logs, and they arrive in the log bucket (its policy admits the region's
    ELB principal)."""
    arn, hostname = load_balancer(ctx)
    if arn is None:
        return failed(f"no load balancer for the Ingress ({hostname or 'no hostname'})")
    listed = ctx.client("elbv2").describe_load_balancer_attributes(LoadBalancerArn=arn)["Attributes"]
    attributes = {a["Key"]: a.get("Value", "") for a in listed}
    if attributes.get("access_logs.s3.enabled") != "true":
        return failed("access_logs.s3.enabled is not true")
    bucket, prefix = attributes.get("access_logs.s3.bucket", ""), attributes.get("access_logs.s3.prefix", "")
    found = ctx.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "", MaxKeys=1)
    keys = [o["Key"] for o in found.get("Contents", [])]
    return verdict(bool(keys), f"s3://{bucket}/{prefix}/: {'objects, e.g. ' + keys[0] if keys else 'no objects yet'}")


def sign_in_before_pods(ctx: Context) -> Outcome:
    """The image pods were created after the sign-in ConfigMap and carry the load balancer's readiness gate."""
    try:
        config_map = ctx.kube.get("configmap", CONFIG_MAP_NAME)
    except KubeError as exc:
        if "not found" in str(exc).lower():
            return skipped(f"no ConfigMap {CONFIG_MAP_NAME} (sign-in is off)")
        raise
    created = config_map["metadata"]["creationTimestamp"]
    pods = serving_pods(ctx, "--selector", IMAGE_POD_SELECTOR)
    if not pods:
        reason = at_rest(ctx)
        return skipped(reason) if reason else failed(f"no pods with {IMAGE_POD_SELECTOR}")
    # RFC 3339 UTC timestamps as the API server writes them compare as strings.
    older = [p["metadata"]["name"] for p in pods if p["metadata"]["creationTimestamp"] <= created]
    ungated = [
        p["metadata"]["name"]
        for p in pods
        if not any(
            g.get("conditionType", "").startswith(READINESS_GATE_PREFIX) for g in p["spec"].get("readinessGates", [])
        )
    ]
    problems = [f"created before {CONFIG_MAP_NAME}: {', '.join(older)}"] if older else []
    problems += [f"no load balancer readiness gate: {', '.join(ungated)}"] if ungated else []
    return verdict(not problems, "; ".join(problems) or f"{len(pods)} pods after {CONFIG_MAP_NAME}, all gated")


def routing_controllers(ctx: Context) -> list[tuple[str, str]]:
    """(Deployment, ServiceAccount) of each routing controller in the namespace."""
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"].get("serviceAccountName", "default"))
        for d in ctx.kube.items("deployments")
        if d["metadata"]["name"].endswith("routing-controller")
    ]


def pod_address(pod: dict[str, Any]) -> tuple[str, int] | None:
    """(IP, first container port) of a running pod, None before it has an address."""
    ip = pod.get("status", {}).get("podIP")
    ports = [p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    return (ip, ports[0]) if ip and ports else None


# Run in another pod: a TCP connection to the serving pod, which the NetworkPolicies must drop (a timeout, not a
# refusal: a refused connection reached the pod).
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except OSError as exc:
    print("timed out" if isinstance(exc, TimeoutError) else f"failed: {exc}")
"""


def network_policy_blocks_pods(ctx: Context) -> Outcome:
    """A pod that is not the load balancer (the routing controller's) cannot reach a serving pod's port."""
    controllers = routing_controllers(ctx)
    if not controllers:
        return skipped("no routing controller to call from (routingMode is not cost-with-failover)")
    addresses = [a for p in serving_pods(ctx, "--selector", IMAGE_POD_SELECTOR) if (a := pod_address(p))]
    if not addresses:
        reason = at_rest(ctx)
        return skipped(reason) if reason else failed(f"no pod with {IMAGE_POD_SELECTOR} has an address")
    (ip, port), source = addresses[0], controllers[0][0]
    said = ctx.kube.run("exec", f"deployment/{source}", "--", "python", "-c", PROBE, ip, str(port)).strip()
    return verdict(said == "timed out", f"{source} -> {ip}:{port}: {said}")


def guard_type_checks(ctx: Context) -> Outcome:
    """The API server type-checked the routing controllers' admission policies without warnings."""
    policies = [
        p
        for p in ctx.kube.items("validatingadmissionpolicies.admissionregistration.k8s.io")
        if "routing-controller" in p["metadata"]["name"]
    ]
    if not policies:
        return skipped("no routing controller admission policy (routingMode is not cost-with-failover)")
    warned = [
        p["metadata"]["name"]
        for p in policies
        if (p.get("status", {}).get("typeChecking") or {}).get("expressionWarnings")
    ]
    if warned:
        return failed("; ".join(f"{n} has expressionWarnings" for n in warned))
    return passed(f"{len(policies)} policies, no expressionWarnings")


def guard_denies(ctx: Context) -> Outcome:
    """Each routing controller's identity is denied a change to the Ingress outside its own annotation (a
    server-side dry run, nothing changes)."""
    controllers = routing_controllers(ctx)
    if not controllers:
        return skipped("no routing controller (routingMode is not cost-with-failover)")
    name = ingress(ctx)["metadata"]["name"]
    results: list[str] = []
    admitted: list[str] = []
    for deployment, account in controllers:
        user = f"system:serviceaccount:{ctx.kube.namespace}:{account}"
        try:
            ctx.kube.run(
                "annotate", "ingress", name, FORBIDDEN_CHANGE, "--overwrite", "--dry-run=server", f"--as={user}"
            )
        except KubeError as exc:
            if GUARD_DENIAL in str(exc):
                results.append(f"{deployment} denied")
                continue
            admitted.append(f"{deployment}: {exc}")
            continue
        admitted.append(f"{deployment} admitted")
    return verdict(not admitted, "; ".join(admitted or results))


CHECKS: Final = (
    Check("model-weights-staged", model_weights),
    Check("neuron-artifacts-compiled", neuron_artifacts),
    Check("dashboards-exist", dashboards),
    Check("alarms-exist", alarms),
    Check("web-acl-on-alb", web_acl_on_alb),
    Check("alb-access-logs", alb_access_logs),
    Check("sign-in-before-pods", sign_in_before_pods),
    Check("routing-guard-type-checked", guard_type_checks),
    Check("routing-guard-denies", guard_denies),
    Check("network-policy-blocks-pods", network_policy_blocks_pods),
)
