"""A deployed stack in miniature for `make verify`'s checks: AWS from moto (and botocore's Stubber where moto
has no such API), the cluster from the stand-in kubectl (tests/support/fake_kubectl.py) over a JSON state."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from verify.context import Context
from verify.kube import Kubectl
from verify.result import Check, Outcome
from verify.stacks import CLUSTER, IMAGES, SERVING

FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_kubectl.py"
REGION = "us-east-1"
NAMESPACE = "sd"
REPOSITORY = "sd-on-eks/stable-diffusion"
REPOSITORY_URI = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/{REPOSITORY}"
OUTPUTS: dict[str, dict[str, str]] = {
    CLUSTER: {
        "ClusterName": "sd-on-eks",
        "UpdateKubeconfig": f"aws eks update-kubeconfig --name sd-on-eks --region {REGION}",
    },
    IMAGES: {"Repository": REPOSITORY_URI},
    SERVING: {
        "ServiceUrl": "https://d111111abcdef8.cloudfront.net/",
        "ModelStoreBucket": "sd-model-store",
        "ModelWeightsUri": "s3://sd-model-store/models/sd2-community--stable-diffusion-2-1-base/",
    },
}


class Cluster:
    """The stand-in cluster: objects by namespace and kind, container logs, admission denials per user."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: dict[str, Any] = {"resources": {}, "container_logs": {}, "admission": {}, "calls": []}
        self.save()

    def add(self, kind: str, *objects: dict[str, Any], namespace: str = NAMESPACE) -> None:
        """Put objects of one kind (kubectl's plural resource name) into a namespace."""
        self.state["resources"].setdefault(namespace, {}).setdefault(kind, []).extend(objects)
        self.save()

    def save(self) -> None:
        self.path.write_text(json.dumps(self.state))

    def calls(self) -> list[list[str]]:
        """Every kubectl command line so far."""
        return [c["argv"] for c in json.loads(self.path.read_text())["calls"]]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """An empty stand-in cluster with the serving namespace; `kubectl` in tmp_path runs the fake."""
    script = tmp_path / "kubectl"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_KUBE_STATE", str(tmp_path / "cluster.json"))
    made = Cluster(tmp_path / "cluster.json")
    made.add("namespaces", {"metadata": {"name": NAMESPACE}})
    return made


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto for every boto3 client, with dummy credentials."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield


def stubbed(service: str) -> tuple[Any, Stubber]:
    """A client whose answers the test gives (botocore checks each request against the service model)."""
    client = boto3.client(service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.activate()
    return client, stubber


@pytest.fixture
def make_context(cluster: Cluster) -> Callable[..., Context]:
    """A Context over the stand-in cluster: `clients` replaces some services' clients (Stubber), the rest are
    boto3's (moto when the test uses `aws`)."""
    kubectl = str(cluster.path.parent / "kubectl")

    def make(
        *,
        outputs: dict[str, dict[str, str]] | None = None,
        clients: dict[str, Any] | None = None,
        token: str = "a-token",  # noqa: S107 - what the stand-in front door expects
        tools: dict[str, str] | None = None,
    ) -> Context:
        given = clients or {}
        return Context(
            region=REGION,
            outputs=json.loads(json.dumps(outputs if outputs is not None else OUTPUTS)),
            kube=Kubectl(NAMESPACE, kubectl),
            clients=lambda service: given.get(service) or boto3.client(service, region_name=REGION),
            token=lambda: token,
            which=lambda tool: (tools or {}).get(tool),
        )

    return make


def run(check: Check | Callable[[Context], Outcome], ctx: Context) -> Outcome:
    """A check's outcome."""
    return check.run(ctx) if isinstance(check, Check) else check(ctx)


def pod(
    name: str,
    *,
    ready: bool = True,
    read_only: bool = True,
    labels: dict[str, str] | None = None,
    volumes: tuple[str, ...] = ("eks-pod-identity-token",),
    image: str = f"{REPOSITORY_URI}:nvidia-abc",
    image_id: str = "",
    owner: str = "ReplicaSet",
) -> dict[str, Any]:
    """A pod as the API server reports it."""
    return {
        "metadata": {
            "name": name,
            "labels": labels if labels is not None else {"app.kubernetes.io/name": "stable-diffusion"},
            "ownerReferences": [{"kind": owner, "name": "x"}],
        },
        "spec": {
            "containers": [{"name": "app", "image": image, "securityContext": {"readOnlyRootFilesystem": read_only}}],
            "volumes": [{"name": v} for v in volumes],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "app", "image": image, "imageID": image_id}],
        },
    }


def deployment(
    name: str,
    images: tuple[str, ...] = (),
    *,
    service_account: str = "default",
    ready: int = 1,
    replicas: int = 1,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Deployment as the API server reports it; `labels` are its pods'."""
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": labels or {}},
                "spec": {
                    "serviceAccountName": service_account,
                    "containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)],
                },
            },
        },
        "status": {"readyReplicas": ready},
    }
