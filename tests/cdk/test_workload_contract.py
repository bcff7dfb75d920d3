"""A third workload joins the chassis through the `Workload` contract alone: a small class here (a Deployment, a
Service, one route and a dashboard row), no shared module touched, and the synthesized app serves it: its route
is on the one Ingress beside the image service's and the LLM's, its objects are applied, its row is on the
dashboard."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import pytest
from aws_cdk import aws_cloudwatch as cw

from cdk.build import STACK_PREFIX
from cdk.chassis.workload import DeployContext, ManifestSpec, StageContext, Staged, Workload
from cdk.config import AppConfig
from cdk.config.serving import ServingConfig
from cdk.front_door.routes import Routes
from cdk.observability.sections import AlarmSection, DashboardSection, DashboardView
from cdk.serving.pod_shape import container_security_context, pod_security_context, service
from cdk.serving.routing import CONTAINER_PORT, PORT_NAME
from tests.cdk.conftest import DEFAULT_OVERRIDES, Synth, synth
from tests.cdk.manifests import manifests

NAME: Final = "echo"
LABELS: Final = {"app.kubernetes.io/name": NAME}
PATH: Final = "/v1/echo"
ACTION: Final = "echo-weighted"
ROW_TITLE: Final = "# Echo: a stub workload"


class EchoWorkload(Workload):
    """One Deployment and its Service on the system nodes, routed at /v1/echo by a weighted action of its own."""

    name = NAME

    def stage(self, ctx: StageContext) -> Staged:
        """Nothing to store: no weights, no identity."""
        self.image = ctx.platform.image_uris[ctx.platform.accelerators[0].name]
        return Staged()

    def service_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """Its Service, before the Ingress that targets it."""
        return [ManifestSpec("EchoService", [service(NAME, dict(LABELS), ctx.cfg, labels=LABELS)])]

    def routes(self, ctx: StageContext) -> Routes:
        """One exact path to its own weighted action, all of it to its one Service."""
        return Routes(paths=(PATH,), path_type="Exact", action=ACTION, weights={NAME: 100}, capacity_service=NAME)

    def pod_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """Its Deployment, applied with the other workloads' pods."""
        return [ManifestSpec("EchoWorkload", [deployment(ctx.cfg, self.image)])]

    def dashboard(self, view: DashboardView) -> DashboardSection:
        """One text row below the front door's."""
        return DashboardSection(tail=[[cw.TextWidget(markdown=ROW_TITLE, width=24, height=2)]])

    def alarms(self, view: DashboardView, cfg: ServingConfig) -> AlarmSection:
        """None."""
        return AlarmSection()


def deployment(cfg: ServingConfig, image: str) -> dict[str, Any]:
    """A restricted one-container Deployment."""
    container = {
        "name": NAME,
        "image": image,
        "ports": [{"name": PORT_NAME, "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "securityContext": container_security_context(),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": cfg.namespace, "labels": LABELS},
        "spec": {
            "selector": {"matchLabels": LABELS},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {"securityContext": pod_security_context(cfg), "containers": [container]},
            },
        },
    }


@pytest.fixture(scope="module")
def echo_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default test synth's settings (both accelerators, the LLM on), with the echo workload added."""

    def extra(config: AppConfig) -> list[Workload]:
        return [EchoWorkload()]

    return synth(tmp_path_factory.mktemp("cdk-echo"), DEFAULT_OVERRIDES, extra_workloads=extra)


@pytest.fixture(scope="module")
def serving_template(echo_synth: Synth) -> dict[str, Any]:
    return echo_synth.raw_templates[f"{STACK_PREFIX}Serving"]


def test_the_stub_workloads_route_is_on_the_one_ingress_beside_the_others(serving_template):
    objects = manifests(serving_template)
    (ingress,) = [m for m in objects if m["kind"] == "Ingress"]
    paths = {p["path"]: p for p in ingress["spec"]["rules"][0]["http"]["paths"]}
    assert paths[PATH]["pathType"] == "Exact"
    assert paths[PATH]["backend"] == {"service": {"name": ACTION, "port": {"name": "use-annotation"}}}
    forward = json.loads(ingress["metadata"]["annotations"][f"alb.ingress.kubernetes.io/actions.{ACTION}"])
    assert forward["forwardConfig"]["targetGroups"] == [{"serviceName": NAME, "servicePort": "80", "weight": 100}]
    # The other workloads keep theirs: the image service's `/` and the LLM's OpenAI paths.
    assert {"/", "/v1/chat/completions"} <= paths.keys()
    # Exact paths first, in the order the load balancer controller evaluates them.
    types = [p["pathType"] for p in ingress["spec"]["rules"][0]["http"]["paths"]]
    assert types == sorted(types, key=lambda t: t != "Exact")


def test_the_stub_workloads_objects_are_applied(serving_template):
    objects = manifests(serving_template)
    named = {(m["kind"], m["metadata"]["name"]) for m in objects}
    assert {("Deployment", NAME), ("Service", NAME)} <= named
    resources = serving_template["Resources"]
    # Under the construct ids the workload gave them, after the namespace.
    ids = {k for k, v in resources.items() if v["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"}
    assert any(i.startswith("EchoService") for i in ids) and any(i.startswith("EchoWorkload") for i in ids)


def test_the_stub_workloads_row_is_on_the_dashboard(serving_template):
    (dashboard,) = [r for r in serving_template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert ROW_TITLE in body
