"""The cluster's own state through kubectl: the images the Deployments run are the ones in ECR, the pods are
Ready with a read-only root and Pod Identity's token, the load balancer controller runs the region's image with
its Pod Identity association, Karpenter is not denied, KEDA reads its metrics, the NetworkPolicies are in place."""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import ClientError

from cdk import versions
from cdk.kubectl_access import TUNNEL_INSTANCE_OUTPUT
from verify.context import Context
from verify.kube import KubeError
from verify.pools import IMAGE_POD_SELECTOR, at_rest, replicas
from verify.prerequisites import expected_here
from verify.result import Check, Outcome, failed, passed, skipped, verdict
from verify.stacks import CLUSTER, IMAGES

# The volume EKS Pod Identity's webhook adds (docs/first-deploy.md).
POD_IDENTITY_VOLUME: Final = "eks-pod-identity-token"
SYSTEM_NAMESPACE: Final = "kube-system"
# Names the stacks give, copied here because their modules import aws-cdk-lib (a Node process to start);
# tests/verify/test_names.py holds each to its source.
SPOT_ROLE_NAME: Final = "AWSServiceRoleForEC2Spot"  # cdk/constructs/spot_role.py
DENY_INGRESS_NAME: Final = "default-deny-ingress"  # cdk/serving/network_policy.py
ALLOW_SERVICE_NAME: Final = "allow-service-port-from-load-balancer"  # cdk/serving/network_policy.py
LBC_DEPLOYMENT: Final = "aws-load-balancer-controller"
LBC_SERVICE_ACCOUNT: Final = "aws-load-balancer-controller"  # cdk/constructs/addons/load_balancer_controller.py
# The chart's selector labels (kubernetes-sigs/aws-load-balancer-controller@v3.2.2
# helm/aws-load-balancer-controller/templates/_helpers.tpl: app.kubernetes.io/name is the chart's name).
LBC_POD_SELECTOR: Final = "app.kubernetes.io/name=aws-load-balancer-controller"
KARPENTER_DEPLOYMENT: Final = "karpenter"


def serving_pods(ctx: Context, *selector: str) -> list[dict[str, Any]]:
    """The namespace's pods that serve (Jobs' pods, which end, are left out)."""
    pods = ctx.kube.items("pods", *selector)
    return [p for p in pods if not any(o.get("kind") == "Job" for o in p["metadata"].get("ownerReferences", []))]


def is_ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def writable_containers(pod: dict[str, Any]) -> list[str]:
    """The pod's containers (init containers too) whose root filesystem is not read-only."""
    spec = pod["spec"]
    return [
        c["name"]
        for c in [*spec.get("initContainers", []), *spec["containers"]]
        if not (c.get("securityContext") or {}).get("readOnlyRootFilesystem")
    ]


def spot_role(ctx: Context) -> Outcome:
    """Where the cluster stack made sure of the EC2 Spot service-linked role, its custom resource completed and
    the role exists."""
    if ctx.on_team_cluster:
        return skipped("on a team's cluster: no cluster stack of ours; the account's Spot role is the team's")
    pages = ctx.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=CLUSTER)
    resources = [
        r for page in pages for r in page["StackResourceSummaries"] if "SpotServiceLinkedRole" in r["LogicalResourceId"]
    ]
    if not resources:
        return skipped("no Spot capacity type: the stack has no SpotServiceLinkedRole")
    unfinished = [
        f"{r['LogicalResourceId']} {r['ResourceStatus']}"
        for r in resources
        if not r["ResourceStatus"].endswith("_COMPLETE")
    ]
    if unfinished:
        return failed("; ".join(unfinished))
    try:
        role = ctx.client("iam").get_role(RoleName=SPOT_ROLE_NAME)["Role"]
    except ClientError as exc:
        return failed(f"{SPOT_ROLE_NAME}: {exc.response['Error']['Code']}")
    return passed(f"{role['RoleName']} exists; {len(resources)} resources complete")


def pods_ready_read_only(ctx: Context) -> Outcome:
    """Every serving pod of the namespace is Ready, and every container in it runs with a read-only root."""
    pods = serving_pods(ctx)
    if not pods:
        reason = at_rest(ctx)
        return skipped(reason) if reason else failed(f"no pods in namespace {ctx.kube.namespace}")
    not_ready = [p["metadata"]["name"] for p in pods if not is_ready(p)]
    writable = [f"{p['metadata']['name']}/{c}" for p in pods for c in writable_containers(p)]
    if not_ready or writable:
        parts = ([f"not Ready: {', '.join(not_ready)}"] if not_ready else []) + (
            [f"writable root: {', '.join(writable)}"] if writable else []
        )
        return failed("; ".join(parts))
    return passed(f"{len(pods)} pods Ready, read-only root")


def ecr_digest(ctx: Context, repository: str, tag: str) -> str | None:
    """The digest of the tag in the stack's own ECR repository, None where the tag is not there."""
    try:
        details = ctx.client("ecr").describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}])
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ImageNotFoundException":
            return None
        raise
    return str(details["imageDetails"][0]["imageDigest"])


def images_pulled(ctx: Context) -> Outcome:
    """The images the Deployments run from the stack's repository exist in ECR, and the running pods' imageIDs
    are those images' digests."""
    repository_uri = ctx.output(IMAGES, "Repository")
    if repository_uri is None:
        return failed(f"stack {IMAGES} has no Repository output")
    registry, _, repository = repository_uri.partition("/")
    # Each tag, and whether a Deployment that runs it asks for a pod (a pool at zero replicas runs none).
    wanted: dict[str, bool] = {}
    for d in ctx.kube.items("deployments"):
        spec = d["spec"]["template"]["spec"]
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            if c["image"].startswith(repository_uri + ":"):
                tag = c["image"].rpartition(":")[2]
                wanted[tag] = wanted.get(tag, False) or replicas(d) > 0
    tags = sorted(wanted)
    if not tags:
        return failed(f"no Deployment runs an image of {repository_uri}")
    digests = {tag: ecr_digest(ctx, repository, tag) for tag in tags}
    missing = [t for t, d in digests.items() if d is None]
    if missing:
        return failed(f"not in ECR: {', '.join(missing)}")
    by_digest = {d: t for t, d in digests.items()}
    problems: list[str] = []
    pulled: set[str] = set()
    for pod in serving_pods(ctx):
        for status in pod.get("status", {}).get("containerStatuses", []):
            image = status.get("image", "")
            if not image.startswith(f"{registry}/{repository}"):
                continue
            digest = status.get("imageID", "").rpartition("@")[2]
            if digest not in by_digest:
                problems.append(f"{pod['metadata']['name']}/{status['name']} runs {digest or 'no image yet'}")
            else:
                pulled.add(by_digest[digest])
    if problems:
        return failed("; ".join(problems))
    unpulled = [t for t in tags if t not in pulled and wanted[t]]
    idle = [t for t in tags if t not in pulled and not wanted[t]]
    return verdict(
        not unpulled,
        f"pulled {', '.join(sorted(pulled)) or 'none'}"
        + (f"; no pod runs {', '.join(unpulled)}" if unpulled else "")
        + (f"; in ECR, its Deployments at zero replicas: {', '.join(idle)}" if idle else ""),
    )


def pod_identity_token(ctx: Context) -> Outcome:
    """The image pods carry EKS Pod Identity's projected token (their AWS credentials without an API token)."""
    pods = serving_pods(ctx, "--selector", IMAGE_POD_SELECTOR)
    if not pods:
        reason = at_rest(ctx)
        return skipped(reason) if reason else failed(f"no pods with {IMAGE_POD_SELECTOR}")
    without = [
        p["metadata"]["name"]
        for p in pods
        if POD_IDENTITY_VOLUME not in {v["name"] for v in p["spec"].get("volumes", [])}
    ]
    if without:
        return failed(f"no {POD_IDENTITY_VOLUME} volume: {', '.join(without)}")
    return passed(f"{POD_IDENTITY_VOLUME} on {len(pods)} pods")


def load_balancer_controller(ctx: Context) -> Outcome:
    """The load balancer controller runs the pinned image from the region's own EKS registry, all replicas ready."""
    registry = versions.EKS_ADDON_REGISTRIES.get(ctx.region)
    if registry is None:
        return skipped(f"cdk/versions.py names no EKS add-on registry for {ctx.region}")
    expected = f"{registry}/{versions.ALB_CONTROLLER_IMAGE_REPOSITORY}:{versions.ALB_CONTROLLER_VERSION}"
    deployment = ctx.kube.get("deployment", LBC_DEPLOYMENT, namespace=SYSTEM_NAMESPACE)
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    status = deployment.get("status", {})
    ready, wanted = status.get("readyReplicas", 0), deployment["spec"].get("replicas", 1)
    if expected not in images:
        return failed(f"runs {', '.join(images)}")
    return verdict(ready >= wanted, f"{expected.rpartition('/')[2]}, {ready}/{wanted} ready")


def load_balancer_controller_pod_identity(ctx: Context) -> Outcome:
    """The controller's service account has a Pod Identity association and its pods carry the Pod Identity token,
    not IRSA's (pods started before the association have no credentials: they need a rollout)."""
    expected = expected_here(ctx)
    if expected is not None and "load-balancer-controller" in expected:
        return skipped("the team's own load balancer controller: how it gets its credentials is the team's")
    cluster = ctx.cluster_name()
    if cluster is None:
        return failed(f"{CLUSTER} has no ClusterName output")
    associations = ctx.client("eks").list_pod_identity_associations(
        clusterName=cluster, namespace=SYSTEM_NAMESPACE, serviceAccount=LBC_SERVICE_ACCOUNT
    )["associations"]
    if not associations:
        return failed(f"no Pod Identity association for {SYSTEM_NAMESPACE}/{LBC_SERVICE_ACCOUNT}")
    pods = ctx.kube.items("pods", "--selector", LBC_POD_SELECTOR, namespace=SYSTEM_NAMESPACE)
    if not pods:
        return failed(f"no pods with {LBC_POD_SELECTOR}")
    without = [
        p["metadata"]["name"]
        for p in pods
        if POD_IDENTITY_VOLUME not in {v["name"] for v in p["spec"].get("volumes", [])}
    ]
    if without:
        return failed(
            f"no {POD_IDENTITY_VOLUME} volume: {', '.join(without)} "
            f"(`kubectl rollout restart deployment/{LBC_DEPLOYMENT} -n {SYSTEM_NAMESPACE}`)"
        )
    return passed(f"{associations[0]['associationId']}; {POD_IDENTITY_VOLUME} on {len(pods)} pods")


def karpenter_not_denied(ctx: Context) -> Outcome:
    """Karpenter's controller log has no AccessDenied (its IAM policy is complete)."""
    try:
        log = ctx.kube.run("logs", f"deployment/{KARPENTER_DEPLOYMENT}", namespace=SYSTEM_NAMESPACE)
    except KubeError as exc:
        if "not found" in str(exc).lower():
            return skipped("no Karpenter Deployment (managed node groups)")
        raise
    denied = sum("AccessDenied" in line for line in log.splitlines())
    return verdict(denied == 0, f"{denied} AccessDenied lines")


def condition(obj: dict[str, Any], kind: str) -> str:
    """The status ("True", "False", "Unknown") of one condition, "absent" where the object has none."""
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return str(c["status"])
    return "absent"


def metric_value(metric: dict[str, Any]) -> str | None:
    """An HPA's current value of one metric (external or resource), None where it has none."""
    for kind in ("external", "resource", "pods", "object", "containerResource"):
        current = (metric.get(kind) or {}).get("current") or {}
        for key in ("value", "averageValue", "averageUtilization"):
            if current.get(key) is not None:
                return str(current[key])
    return None


def keda_triggers(ctx: Context) -> Outcome:
    """Every ScaledObject is Ready and its HPA has a current value for every metric (the triggers read real
    metrics through the workload identity). At zero replicas the HPA is idle and reads nothing; KEDA itself reads
    the triggers then and, with no fallback set (ours set none), marks the ScaledObject Ready False "TriggerError"
    when they fail (kedacore/keda pkg/scaling/executor/scale_scaledobjects.go), so Ready is the evidence there."""
    scaled = ctx.kube.items("scaledobjects.keda.sh")
    if not scaled:
        return failed(f"no ScaledObjects in namespace {ctx.kube.namespace}")
    hpas = {h["metadata"]["name"]: h for h in ctx.kube.items("horizontalpodautoscalers")}
    sizes = {d["metadata"]["name"]: replicas(d) for d in ctx.kube.items("deployments")}
    problems: list[str] = []
    shown: list[str] = []
    for obj in scaled:
        name = obj["metadata"]["name"]
        if condition(obj, "Ready") != "True":
            problems.append(f"{name} Ready {condition(obj, 'Ready')}")
            continue
        hpa_name = obj.get("status", {}).get("hpaName", f"keda-hpa-{name}")
        metrics = (hpas.get(hpa_name) or {}).get("status", {}).get("currentMetrics") or []
        values = [metric_value(m) for m in metrics]
        target = obj.get("spec", {}).get("scaleTargetRef", {}).get("name", "")
        if not any(v is not None for v in values) and sizes.get(target) == 0:
            shown.append(f"{name} Ready, at zero replicas (its HPA reads no metric until KEDA starts a pod)")
            continue
        if not values or None in values:
            problems.append(f"{name}: {hpa_name} has no current value for {values.count(None) or 'any'} metric(s)")
            continue
        shown.append(f"{name} Active {condition(obj, 'Active')} [{', '.join(str(v) for v in values)}]")
    if problems:
        return failed("; ".join(problems))
    return passed("; ".join(shown))


def network_policies(ctx: Context) -> Outcome:
    """The default deny and the load balancer's allowance are in the namespace."""
    names = {p["metadata"]["name"] for p in ctx.kube.items("networkpolicies")}
    missing = [n for n in (DENY_INGRESS_NAME, ALLOW_SERVICE_NAME) if n not in names]
    return verdict(not missing, f"missing {', '.join(missing)}" if missing else f"{len(names)} policies, both there")


def kubectl_tunnel(ctx: Context) -> Outcome:
    """The kubectl tunnel instance (`make kubectl-tunnel`) is registered with Systems Manager and online, so a
    port-forwarding session can start."""
    if ctx.on_team_cluster:
        return skipped("on a team's cluster: the app adds no kubectl tunnel; reach the cluster as the team does")
    instance = ctx.output(CLUSTER, TUNNEL_INSTANCE_OUTPUT)
    if instance is None:
        return skipped(f"kubectlTunnel=false: the {CLUSTER} stack has no {TUNNEL_INSTANCE_OUTPUT} output")
    answer = ctx.client("ssm").describe_instance_information(Filters=[{"Key": "InstanceIds", "Values": [instance]}])
    found = answer["InstanceInformationList"]
    if not found:
        return failed(f"{instance} is not registered with Systems Manager (its role, or its HTTPS route out)")
    status = found[0].get("PingStatus", "unknown")
    return verdict(status == "Online", f"{instance} PingStatus {status}")


CHECKS: Final = (
    Check("kubectl-tunnel-online", kubectl_tunnel),
    Check("images-pulled", images_pulled),
    Check("pods-ready-read-only", pods_ready_read_only),
    Check("pod-identity-token", pod_identity_token),
    Check("load-balancer-controller-image", load_balancer_controller),
    Check("load-balancer-controller-pod-identity", load_balancer_controller_pod_identity),
    Check("spot-service-linked-role", spot_role),
    Check("karpenter-not-denied", karpenter_not_denied),
    Check("keda-triggers-read-metrics", keda_triggers),
    Check("network-policies", network_policies),
)
