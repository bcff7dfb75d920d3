"""The deploy-time prerequisite check's handler against a real HTTPS server standing in for the cluster's API:
TLS pinned to the CA that eks:DescribeCluster returns (botocore-stubbed), a bearer token checked by the server,
and the one line the deploy shows when an object is missing or not what the manifests need."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.stub import Stubber

from cdk.prerequisites import BY_NAME
from lambdas import prerequisite_check as handler
from tests.support.loopback_tls import self_signed_loopback

REGION = "us-east-1"
CLUSTER = "team-cluster"


def self_signed(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A certificate for 127.0.0.1 that is its own CA: (cert file, key file, PEM)."""
    return self_signed_loopback(tmp_path, "api", "kubernetes")


class FakeApi:
    """Objects by API path; answers 401 without an EKS token for CLUSTER, 404 for what it does not hold."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.tokens: list[str] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                api.tokens.append(token)
                if not presigned_for(token, CLUSTER):
                    self.reply(401, {"kind": "Status", "reason": "Unauthorized"})
                elif self.path in api.objects:
                    self.reply(200, api.objects[self.path])
                else:
                    self.reply(404, {"kind": "Status", "reason": "NotFound"})

            def reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def presigned_for(token: str, cluster: str) -> bool:
    """The token is an EKS one: a presigned STS GetCallerIdentity URL whose signature covers x-k8s-aws-id."""
    if not token.startswith("k8s-aws-v1."):
        return False
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = parse_qs(urlsplit(url).query)
    return (
        urlsplit(url).hostname == f"sts.{REGION}.amazonaws.com"
        and query.get("Action") == ["GetCallerIdentity"]
        and "x-k8s-aws-id" in query.get("X-Amz-SignedHeaders", [""])[0].split(";")
        and bool(query.get("X-Amz-Signature"))
        and cluster != ""
    )


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    """The fake API on a free loopback port over TLS; DescribeCluster (stubbed) points the handler at it."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    cert_file, key_file, pem = self_signed(tmp_path)
    fake = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    eks = boto3.client("eks", region_name=REGION)
    stubber = Stubber(eks)
    cluster = {
        "name": CLUSTER,
        "endpoint": f"https://127.0.0.1:{server.server_address[1]}",
        "certificateAuthority": {"data": base64.b64encode(pem).decode()},
    }
    for _ in range(4):
        stubber.add_response("describe_cluster", {"cluster": cluster}, {"name": CLUSTER})
    stubber.activate()
    real_session = boto3.Session

    class Session(real_session):  # type: ignore[misc,valid-type]
        def client(self, service: str, *args: Any, **kwargs: Any) -> Any:
            return eks if service == "eks" else super().client(service, *args, **kwargs)

    monkeypatch.setattr(handler.boto3, "Session", Session)
    yield fake
    server.shutdown()
    server.server_close()


def crd(name: str, *served: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"versions": [{"name": v, "served": True} for v in served]}}


def event(prerequisite: str, request: str = "Create") -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": BY_NAME[prerequisite].check_properties(CLUSTER)}


def test_a_present_prerequisite_passes_with_an_eks_token(api: FakeApi):
    api.objects["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh"] = crd(
        "nodepools.karpenter.sh", "v1"
    )
    api.objects["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ec2nodeclasses.karpenter.k8s.aws"] = crd(
        "ec2nodeclasses.karpenter.k8s.aws", "v1beta1", "v1"
    )
    assert handler.on_event(event("karpenter"), None) == {"PhysicalResourceId": handler.PHYSICAL_ID}
    assert len(api.tokens) == 2 and all(presigned_for(t, CLUSTER) for t in api.tokens)


def test_a_missing_prerequisite_fails_in_one_line_naming_its_setting(api: FakeApi):
    with pytest.raises(handler.PrerequisiteMissing) as failure:
        handler.on_event(event("load-balancer-controller"), None)
    assert str(failure.value) == (
        "the AWS Load Balancer Controller (load-balancer-controller) is expected but no ingressclass alb: "
        "install it, or set existingClusterLoadBalancerController=install"
    )


def test_an_old_karpenter_fails_naming_the_version_the_manifests_need(api: FakeApi):
    api.objects["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh"] = crd(
        "nodepools.karpenter.sh", "v1beta1"
    )
    with pytest.raises(
        handler.PrerequisiteMissing,
        match=r"^Karpenter v1 \(karpenter\) is expected but "
        r"nodepools.karpenter.sh serves \['v1beta1'\], not v1: install it, or set "
        r"existingClusterKarpenter=install$",
    ):
        handler.on_event(event("karpenter"), None)


def test_another_controllers_ingress_class_fails(api: FakeApi):
    api.objects["/apis/networking.k8s.io/v1/ingressclasses/alb"] = {"spec": {"controller": "k8s.io/ingress-nginx"}}
    with pytest.raises(
        handler.PrerequisiteMissing, match=r"ingressclass alb is 'k8s\.io/ingress-nginx', not ingress\.k8s\.aws/alb:"
    ):
        handler.on_event(event("load-balancer-controller"), None)


def test_a_daemonset_in_its_namespace_passes_and_delete_reads_nothing(api: FakeApi):
    api.objects["/apis/apps/v1/namespaces/amazon-cloudwatch/daemonsets/cloudwatch-agent"] = {"spec": {}}
    handler.on_event(event("cloudwatch-agent", "Update"), None)
    handler.on_event(event("keda", "Delete"), None)
    assert len(api.tokens) == 1


def test_a_role_the_cluster_refuses_fails_saying_so(api: FakeApi, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(handler, "TOKEN_PREFIX", "not-an-eks-token.")
    with pytest.raises(
        handler.PrerequisiteMissing,
        match=r"nodepools.karpenter.sh from the cluster's API "
        r"answered HTTP 401",
    ):
        handler.on_event(event("karpenter"), None)


LBC_CLASS = "/apis/networking.k8s.io/v1/ingressclasses/alb"
# The list the chart's Deployment is in, its selector URL-encoded as the handler sends it.
LBC_SELECTOR = "app.kubernetes.io%2Fname%3Daws-load-balancer-controller"
LBC_DEPLOYMENTS = f"/apis/apps/v1/namespaces/kube-system/deployments?labelSelector={LBC_SELECTOR}"


def controller(tag: str) -> dict[str, Any]:
    """The chart's Deployment as the API lists it, running the controller's image at `tag`."""
    image = f"602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon/aws-load-balancer-controller:{tag}"
    deployment = {
        "metadata": {"name": "aws-load-balancer-controller"},
        "spec": {"template": {"spec": {"containers": [{"name": "controller", "image": image}]}}},
    }
    return {"kind": "DeploymentList", "items": [deployment]}


def test_a_load_balancer_controller_older_than_our_ingress_needs_fails(api: FakeApi):
    api.objects[LBC_CLASS] = {"spec": {"controller": "ingress.k8s.aws/alb"}}
    api.objects[LBC_DEPLOYMENTS] = controller("v2.3.1")
    with pytest.raises(handler.PrerequisiteMissing) as failure:
        handler.on_event(event("load-balancer-controller"), None)
    assert str(failure.value).startswith(
        "the AWS Load Balancer Controller (load-balancer-controller) is expected but aws-load-balancer-controller "
        "runs v2.3.1, older than v2.4.0 (the first to reconcile networking.k8s.io/v1 Ingresses"
    )
    assert str(failure.value).endswith("install it, or set existingClusterLoadBalancerController=install")


@pytest.mark.parametrize("tag", ["v2.4.0", "v2.13.0", "v3.2.2-linux_amd64", "latest"])
def test_a_new_enough_or_unknown_controller_version_passes(api: FakeApi, tag: str):
    api.objects[LBC_CLASS] = {"spec": {"controller": "ingress.k8s.aws/alb"}}
    api.objects[LBC_DEPLOYMENTS] = controller(tag)
    handler.on_event(event("load-balancer-controller"), None)


def test_a_controller_deployed_under_other_labels_is_not_failed_for_its_version(api: FakeApi):
    api.objects[LBC_CLASS] = {"spec": {"controller": "ingress.k8s.aws/alb"}}
    handler.on_event(event("load-balancer-controller"), None)  # the list path answers 404 here: nothing to tell
