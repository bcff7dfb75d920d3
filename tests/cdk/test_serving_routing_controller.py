"""cost-with-failover on the cluster: the controller's objects are schema-valid, its RBAC allows exactly
the calls its loop makes, the patch it sends keeps a valid Ingress and a valid LBC action, and it is
watched on the dashboard with a zero-weight alarm."""

from __future__ import annotations

import copy
import json
import re
from urllib.parse import urlparse

import pytest
from kubernetes import client

from cdk import versions
from cdk.front_door import routing_controller as rcw
from cdk.front_door.ingress import INGRESS_NAME
from cdk.image.serving import ROUTING_CONTROLLER_NAME as IMAGE_CONTROLLER
from cdk.image.serving import WEIGHTED_ACTION_NAME
from cdk.serving.routing import WEIGHT_TOTAL
from common import metric_names
from routing_controller import annotation
from routing_controller.loop import Controller
from routing_controller.settings import Settings
from tests.cdk.conftest import REPO_ROOT, resources_of
from tests.routing_controller.fake_kube import FakeKube
from tests.routing_controller.objects import deployment, ingress_object, node_claim, pod
from tests.support.k8s_schema import validate_all, validate_core
from tests.support.lbc_action import InvalidAction, parse_weighted_forward
from tests.support.lock_site import lock_site
from tools.image_locks import lock_closure_problems

CONTROLLER_KINDS = {
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Deployment",
}


def controller_objects(manifests):
    return {
        m["kind"]: m
        for m in manifests
        if {"app.kubernetes.io/name": IMAGE_CONTROLLER}.items() <= m["metadata"].get("labels", {}).items()
    }


def synthesized_ingress(manifests):
    (ingress,) = [m for m in manifests if m["kind"] == "Ingress"]
    return ingress


def test_controller_objects_exist_and_are_schema_valid(serving):
    objects = controller_objects(serving.manifests)
    assert set(objects) == CONTROLLER_KINDS
    assert validate_all(objects.values(), serving.platform.kubernetes_version) == []


def test_controller_runs_on_the_system_nodes_non_root_with_its_own_image(serving):
    pod_spec = controller_objects(serving.manifests)["Deployment"]["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"role": "system"}
    assert "tolerations" not in pod_spec  # never on an accelerator node
    assert pod_spec["serviceAccountName"] == IMAGE_CONTROLLER
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    (container,) = pod_spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert re.search(r"/sd-on-eks/stable-diffusion:routing-controller-[0-9a-f]{64}$", container["image"])
    # The Dockerfile's user is the one the pod runs as.
    dockerfile = (REPO_ROOT / "routing_controller" / "Dockerfile").read_text()
    assert f"USER {rcw.RUN_AS_USER}:{rcw.RUN_AS_USER}" in dockerfile
    assert pod_spec["securityContext"]["runAsUser"] == rcw.RUN_AS_USER


def test_the_environment_the_stack_writes_is_what_the_controller_reads(serving):
    (container,) = controller_objects(serving.manifests)["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    settings = Settings.from_env(env)
    rc = serving.config.routing_controller
    assert (settings.period_s, settings.hold_s, settings.band_pods) == (rc.period_s, rc.hold_s, rc.band_pods)
    assert settings.ingress == INGRESS_NAME and settings.action == WEIGHTED_ACTION_NAME
    ingress = synthesized_ingress(serving.manifests)
    deployed = annotation.decode_weights(ingress["metadata"]["annotations"][annotation.annotation_key(settings.action)])
    # The controller's cost weights are the ones the Ingress is deployed with, per Service.
    assert {p.service: p.cost_weight for p in settings.pools} == deployed
    services = {m["metadata"]["name"] for m in serving.manifests if m["kind"] == "Service"}
    deployments = {m["metadata"]["name"] for m in serving.manifests if m["kind"] == "Deployment"}
    assert {p.service for p in settings.pools} <= services
    assert {p.deployment for p in settings.pools} <= deployments
    assert {p.node_pool for p in settings.pools} == {"neuron", "nvidia"}  # the Karpenter NodePools' names


def test_rbac_is_exactly_namespaced_reads_one_ingress_and_events(serving):
    objects = controller_objects(serving.manifests)
    role = objects["Role"]
    assert role["metadata"]["namespace"] == serving.config.namespace
    flat = {
        (group, resource, verb, tuple(rule.get("resourceNames", [])))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert flat == {
        ("apps", "deployments", "get", ()),
        ("apps", "deployments", "list", ()),
        ("apps", "deployments", "watch", ()),
        ("", "pods", "get", ()),
        ("", "pods", "list", ()),
        ("", "pods", "watch", ()),
        ("networking.k8s.io", "ingresses", "get", (INGRESS_NAME,)),
        ("networking.k8s.io", "ingresses", "patch", (INGRESS_NAME,)),
        ("", "events", "create", ()),
    }
    assert objects["ClusterRole"]["rules"] == [
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["get", "list", "watch"]}
    ]
    for binding in (objects["RoleBinding"], objects["ClusterRoleBinding"]):
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": IMAGE_CONTROLLER,
                "namespace": serving.config.namespace,
            }
        ]
    assert objects["RoleBinding"]["roleRef"]["name"] == role["metadata"]["name"]
    assert objects["ClusterRoleBinding"]["roleRef"]["name"] == objects["ClusterRole"]["metadata"]["name"]


def _request_attributes(method: str, path: str) -> tuple[str, str, str, str | None, bool]:
    """(apiGroup, resource, verb, name, namespaced) of one API request, as the API server's authorizer sees it."""
    parts = urlparse(path).path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespaced = rest[0] == "namespaces"
    if namespaced:
        rest = rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    verb = {"GET": "get" if name else "list", "PATCH": "patch", "POST": "create"}[method]
    return group, resource, verb, name, namespaced


def _allowed(rules, group, resource, verb, name) -> bool:
    return any(
        group in r["apiGroups"]
        and resource in r["resources"]
        and verb in r["verbs"]
        and (not r.get("resourceNames") or name in r["resourceNames"])
        for r in rules
    )


def test_rbac_allows_every_call_the_loop_makes(serving):
    """Run the real loop through a failover against a stand-in API; authorize each request it made."""
    objects = controller_objects(serving.manifests)
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    settings = Settings.from_env({e["name"]: e["value"] for e in container["env"] if "value" in e})
    ns = settings.namespace
    with FakeKube() as fake:
        fake.objects[f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/{settings.ingress}"] = ingress_object(
            {p.service: p.cost_weight for p in settings.pools}
        )
        for p in settings.pools:
            fake.objects[f"/apis/apps/v1/namespaces/{ns}/deployments/{p.deployment}"] = deployment(p.deployment, 1)
        fake.lists[f"/api/v1/namespaces/{ns}/pods"] = [pod(settings.pools[1].deployment, 0, True)]
        fake.lists["/apis/karpenter.sh/v1/nodeclaims"] = [node_claim(settings.pools[0].node_pool, "NoCapacity")]
        Controller(settings, client.ApiClient(client.Configuration(host=fake.url)), None, clock=lambda: 0.0).step()
        requests = list(fake.requests)
    assert {r[0] for r in requests} == {"GET", "PATCH", "POST"}
    for method, path, _, _ in requests:
        group, resource, verb, name, namespaced = _request_attributes(method, path)
        rules = objects["Role"]["rules"] if namespaced else objects["ClusterRole"]["rules"]
        assert _allowed(rules, group, resource, verb, name), f"{method} {path} is not allowed"


@pytest.mark.parametrize("weights", [{"sd-neuron": 0, "sd-gpu": 100}, {"sd-neuron": 48, "sd-gpu": 52}])
def test_the_patch_keeps_a_valid_ingress_and_a_valid_weighted_action(serving, weights):
    ingress = synthesized_ingress(serving.manifests)
    deployed = parse_weighted_forward(
        ingress["metadata"]["annotations"][annotation.annotation_key(WEIGHTED_ACTION_NAME)]
    )
    assert sum(deployed.values()) == WEIGHT_TOTAL
    body = annotation.patch_body(WEIGHTED_ACTION_NAME, weights, 80)
    # A JSON merge patch of annotations only: apply it as the API server would.
    patched = copy.deepcopy(ingress)
    patched["metadata"]["annotations"].update(body["metadata"]["annotations"])
    validate_core(patched, serving.platform.kubernetes_version)
    written = parse_weighted_forward(
        patched["metadata"]["annotations"][annotation.annotation_key(WEIGHTED_ACTION_NAME)]
    )
    assert written == weights
    assert set(written) == set(deployed) and sum(written.values()) == sum(deployed.values())
    # Everything else on the Ingress (listeners, scheme, auth) is untouched.
    assert {k: v for k, v in patched["metadata"]["annotations"].items() if "actions." not in k} == {
        k: v for k, v in ingress["metadata"]["annotations"].items() if "actions." not in k
    }


def test_the_action_check_is_not_blind():
    with pytest.raises(InvalidAction, match="weight must be set"):
        parse_weighted_forward(
            json.dumps(
                {"type": "forward", "forwardConfig": {"targetGroups": [{"serviceName": "a", "servicePort": "80"}] * 2}}
            )
        )
    with pytest.raises(InvalidAction, match=r"0\.\.999"):
        parse_weighted_forward(annotation.encode({"a": 1}, 80).replace('"weight":1', '"weight":1000'))


def test_controller_identity_may_only_put_its_metrics(serving):
    roles = serving.template.find_resources("AWS::IAM::Role")
    (role,) = [r for r in roles.values() if "Routing controller" in r["Properties"].get("Description", "")]
    (policy,) = role["Properties"]["Policies"]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "cloudwatch:PutMetricData"
    assert statement["Condition"] == {"StringEquals": {"cloudwatch:namespace": metric_names.NAMESPACE}}


def test_dashboard_shows_weights_beside_requests_and_pods(serving):
    (dashboard,) = serving.template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))
    rows: dict[int, list[str]] = {}
    for widget in body["widgets"]:
        rows.setdefault(widget["y"], []).append(widget["properties"].get("title", ""))
    (row,) = [titles for titles in rows.values() if "Routing weight (of 100)" in titles]
    assert row == ["Routing weight (of 100)", "Requests per minute", "Running pods"]
    weight_lines = [
        line
        for widget in body["widgets"]
        for line in widget["properties"].get("metrics", [])
        if metric_names.ROUTING_WEIGHT.name in line
    ]
    assert {line[line.index("DeploymentUnit") + 1] for line in weight_lines} == {"sd-neuron", "sd-gpu"}


def test_alarm_when_an_accelerator_stays_at_weight_zero(serving):
    alarms = serving.template.find_resources("AWS::CloudWatch::Alarm")
    zero = {}
    for alarm in alarms.values():
        (query,) = alarm["Properties"].get("Metrics", [{}])[:1] or [{}]
        metric = query.get("MetricStat", {}).get("Metric", {})
        if metric.get("MetricName") == metric_names.ROUTING_WEIGHT.name:
            dims = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
            zero[dims["DeploymentUnit"]] = (alarm["Properties"], query["MetricStat"])
    assert set(zero) == {"sd-neuron", "sd-gpu"}
    minutes = serving.config.routing_controller.zero_weight_alarm_minutes
    for props, stat in zero.values():
        assert props["ComparisonOperator"] == "LessThanThreshold" and props["Threshold"] == 1
        assert stat["Period"] * props["EvaluationPeriods"] == minutes * 60
        assert stat["Stat"] == "Maximum"
        assert props["AlarmActions"]  # the configured topic


def test_capacity_mode_has_no_controller(capacity_serving, variant_synth):
    assert not controller_objects(capacity_serving.manifests)
    assert "RoutingWeight" not in json.dumps(capacity_serving.template.to_json())
    assert variant_synth.handle.routing_controller_image is None
    builds = json.dumps(variant_synth.raw_templates["SdOnEksImages"])
    assert "routing-controller" not in builds


def test_controller_image_is_built_by_its_own_project(platform_synth):
    template = platform_synth.raw_templates["SdOnEksImages"]
    projects = resources_of(template, "AWS::CodeBuild::Project").values()
    (project,) = [p for p in projects if p["Properties"]["Source"]["BuildSpec"] == "buildspecs/routing-controller.yml"]
    variables = {v["Name"]: v["Value"] for v in project["Properties"]["Environment"]["EnvironmentVariables"]}
    assert variables["BASE_IMAGE"] == versions.ROUTING_CONTROLLER_BASE_IMAGE
    assert variables["IMAGE_TAG"].startswith("routing-controller-")
    assert project["Properties"]["Environment"]["ComputeType"] == "BUILD_GENERAL1_SMALL"
    assert platform_synth.handle.routing_controller_image.endswith(variables["IMAGE_TAG"])


def test_controller_source_holds_only_the_controller(tmp_path):
    from aws_cdk import CopyOptions, FileSystem, IgnoreMode

    from cdk.constructs.image_builds import REPO_ROOT as ROOT
    from cdk.constructs.image_builds import ROUTING_CONTROLLER_EXCLUDES

    copied = tmp_path / "source"
    FileSystem.copy_directory(
        str(ROOT), str(copied), CopyOptions(exclude=ROUTING_CONTROLLER_EXCLUDES, ignore_mode=IgnoreMode.GLOB)
    )
    files = {str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()}
    shared = {str(p.relative_to(ROOT)) for p in (ROOT / "common").rglob("*.py")}
    own = ("routing_controller/", "common/")
    assert {f for f in files if not f.startswith(own)} == {"buildspecs/routing-controller.yml"}
    assert {f for f in files if f.startswith("common/")} == shared  # the shared runtime, whole
    assert "routing_controller/Dockerfile" in files and "routing_controller/requirements.lock" in files


def test_image_installs_exactly_the_lock():
    lock = (REPO_ROOT / "routing_controller" / "requirements.lock").read_text().splitlines()
    pins = dict(line.split("==") for line in lock if line and not line.startswith("#"))
    inputs = (REPO_ROOT / "routing_controller" / "requirements.txt").read_text().splitlines()
    for line in inputs:
        if line and not line.startswith("#"):
            name, version = line.split("==")
            assert pins[name] == version
    dockerfile = (REPO_ROOT / "routing_controller" / "Dockerfile").read_text()
    assert "--no-deps" in dockerfile and "requirements.lock" in dockerfile
    assert "COPY app/ " not in dockerfile and "COPY . " not in dockerfile  # never the service


def test_lock_is_closed_for_the_base_images_python():
    # The lock was resolved from Python 3.11, which added typing_extensions (only Python < 3.13 needs it), and
    # pinned botocore, certifi and PyYAML at versions the tested environment did not hold.
    python = versions.ROUTING_CONTROLLER_BASE_IMAGE.rsplit(":", 1)[1].split("-", 1)[0]
    lock = REPO_ROOT / "routing_controller" / "requirements.lock"
    assert f"Python {python} = the base image" in lock.read_text()
    site = [str(lock_site(lock, python))]
    assert lock_closure_problems(lock, REPO_ROOT / "routing_controller" / "requirements.txt", python, path=site) == []


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("cost-with-failover", {"sd-neuron": 25, "sd-gpu": 75}), ("cost", {"sd-neuron": 1, "sd-gpu": 3})],
)
def test_explicit_weights_are_deployed_at_the_controllers_total(mode, expected):
    from cdk.accelerators import NEURON, NVIDIA
    from cdk.config.serving import ServingConfig
    from cdk.image.serving import routing_weights
    from tests.cdk.conftest import DEFAULT_CONTEXT

    cfg = ServingConfig.from_context(
        DEFAULT_CONTEXT | {"routingMode": mode, "routingWeightNeuron": 1, "routingWeightNvidia": 3}
    )
    # With failover the Ingress starts with what the controller sets while healthy: no patch at start.
    assert routing_weights(cfg, (NEURON, NVIDIA)) == expected
