"""The containers the stacks run, read from the synthesized templates, with their tokens made local.

Each Kubernetes manifest is embedded in a Custom::AWSCDK-EKS-KubernetesResource as an Fn::Join of JSON
text and CloudFormation intrinsics. `LocalValues` turns each intrinsic into the value the rehearsal uses
for it (a bucket name on the local moto server, a queue URL there, ...); an intrinsic it does not know
becomes a marker that fails the rehearsal of any container whose command or environment uses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

ACCOUNT: Final = "123456789012"
MOTO_PORT: Final = 5000  # inside each sandbox's own network namespace, so never taken
MOTO_ENDPOINT: Final = f"http://127.0.0.1:{MOTO_PORT}"
UNRESOLVED: Final = "UNRESOLVED-INTRINSIC"
_WORKLOAD_KINDS: Final = ("Deployment", "Job", "CronJob", "StatefulSet", "DaemonSet")


def size_bytes(quantity: str) -> int:
    """A Kubernetes quantity with a binary suffix ("2Gi", "64Mi") in bytes."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity.removesuffix(suffix)) * factor
    return int(quantity)


@dataclass
class LocalValues:
    """What each CloudFormation intrinsic of a template stands for in the rehearsal."""

    region: str
    resources: Mapping[str, dict[str, Any]]
    buckets: dict[str, str] = field(default_factory=dict)  # logical id -> local bucket name
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue name
    topics: dict[str, str] = field(default_factory=dict)  # logical id -> topic name
    repositories: dict[str, str] = field(default_factory=dict)  # logical id -> ECR repository name

    def ref(self, logical_id: str) -> str:
        """The value of {"Ref": logical_id}."""
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::Partition": "aws",
        }
        if logical_id in pseudo:
            return pseudo[logical_id]
        kind = self.resources.get(logical_id, {}).get("Type")
        # Local names: lowercase logical ids are valid bucket, queue and topic names.
        if kind == "AWS::S3::Bucket":
            return self.buckets.setdefault(logical_id, logical_id.lower())
        if kind == "AWS::SQS::Queue":  # Ref gives the queue URL
            name = self.queues.setdefault(logical_id, logical_id.lower())
            return f"{MOTO_ENDPOINT}/{ACCOUNT}/{name}"
        if kind == "AWS::ECR::Repository":
            return self.repositories.setdefault(logical_id, logical_id.lower())
        if kind == "AWS::SNS::Topic":  # Ref gives the topic ARN
            name = self.topics.setdefault(logical_id, logical_id.lower())
            return f"arn:aws:sns:{self.region}:{ACCOUNT}:{name}"
        return f"{UNRESOLVED}(Ref {logical_id})"

    def get_att(self, logical_id: str, attribute: str) -> str:
        """The value of {"Fn::GetAtt": [logical_id, attribute]} for the attributes the rehearsal needs."""
        kind = self.resources.get(logical_id, {}).get("Type")
        if (kind, attribute) == ("AWS::ECR::Repository", "Arn"):
            return f"arn:aws:ecr:{self.region}:{ACCOUNT}:repository/{self.ref(logical_id)}"
        if (kind, attribute) == ("AWS::S3::Bucket", "Arn"):
            return f"arn:aws:s3:::{self.ref(logical_id)}"
        return f"{UNRESOLVED}(GetAtt {logical_id}.{attribute})"

    def value(self, intrinsic: Any) -> str:
        """A string intrinsic's local value."""
        if isinstance(intrinsic, str):
            return intrinsic
        if isinstance(intrinsic, dict) and "Ref" in intrinsic:
            return self.ref(intrinsic["Ref"])
        if isinstance(intrinsic, dict) and "Fn::GetAtt" in intrinsic:
            return self.get_att(*intrinsic["Fn::GetAtt"])
        if isinstance(intrinsic, dict) and "Fn::Join" in intrinsic:
            separator, parts = intrinsic["Fn::Join"]
            return separator.join(self.value(p) for p in parts)
        if isinstance(intrinsic, dict) and "Fn::Select" in intrinsic:
            index, listed = intrinsic["Fn::Select"]
            if isinstance(listed, dict) and "Fn::Split" in listed:
                separator, text = listed["Fn::Split"]
                return self.value(text).split(separator)[int(index)]
        # No quotes: the marker lands inside a JSON string of the manifest.
        name = next(iter(intrinsic)) if isinstance(intrinsic, dict) and intrinsic else type(intrinsic).__name__
        return f"{UNRESOLVED}({name})"


@dataclass(frozen=True)
class Volume:
    """A writable volume as the container sees it."""

    name: str
    mount_path: str
    size_bytes: int
    in_memory: bool


@dataclass(frozen=True)
class Container:
    """One container of one workload, as its pod template runs it."""

    workload: str  # Kind/name
    namespace: str
    name: str
    init: bool
    image: str
    command: tuple[str, ...] | None
    args: tuple[str, ...] | None
    env: Mapping[str, str]
    volumes: tuple[Volume, ...]
    run_as_user: int
    run_as_group: int
    read_only_root: bool
    service_account_token: bool  # automountServiceAccountToken: the kubelet mounts a token for the API
    readiness: Mapping[str, Any] | None  # the readinessProbe, its named port resolved
    pod_spec: Mapping[str, Any]
    secrets: tuple[tuple[str, str], ...] = ()  # (Secret name, mount path) of each secret volume it mounts

    @property
    def label(self) -> str:
        """`Kind/name:container`, for test ids and messages."""
        return f"{self.workload}:{self.name}"

    @property
    def image_kind(self) -> str:
        """neuron, nvidia, routing-controller or starting-gate: the image tag's prefix
        (cdk/constructs/image_builds.py)."""
        tag = self.image.rsplit(":", 1)[-1]
        for kind in ("routing-controller", "starting-gate", "neuron", "nvidia"):
            if tag.startswith(f"{kind}-"):
                return kind
        raise ValueError(f"{self.label}: unknown image {self.image}")


def kubernetes_manifests(template: dict[str, Any], values: LocalValues) -> Iterator[dict[str, Any]]:
    """Every manifest the template applies, with its intrinsics made local."""
    for resource in template.get("Resources", {}).values():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            yield from json.loads(values.value(resource["Properties"]["Manifest"]))


def _pod_template(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    if manifest["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]


def _env(container: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container's variables; a fieldRef to the pod's name gets the rehearsal pod's name."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[item["name"]] = pod_name
        else:
            env[item["name"]] = f"{UNRESOLVED}(valueFrom {sorted(item['valueFrom'])})"
    return env


def _readiness(container: dict[str, Any]) -> dict[str, Any] | None:
    """The readinessProbe with an httpGet's named port turned into its number."""
    probe = container.get("readinessProbe")
    if probe is None or "httpGet" not in probe:
        return probe
    port = probe["httpGet"]["port"]
    if isinstance(port, str):
        (port,) = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == port]
    return {**probe, "httpGet": {**probe["httpGet"], "port": port}}


def containers(manifests: list[dict[str, Any]]) -> list[Container]:
    """Every container (init containers first) of every workload among `manifests`."""
    found: list[Container] = []
    for manifest in manifests:
        if manifest["kind"] not in _WORKLOAD_KINDS:
            continue
        workload = f"{manifest['kind']}/{manifest['metadata']['name']}"
        pod = _pod_template(manifest)["spec"]
        pod_security = pod.get("securityContext", {})
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for init, items in ((True, pod.get("initContainers", [])), (False, pod["containers"])):
            for item in items:
                security = {**pod_security, **item.get("securityContext", {})}
                mounts, secrets = [], []
                for mount in item.get("volumeMounts", []):
                    if "secret" in volumes[mount["name"]]:  # written by whoever runs the pod: the test gives it
                        secrets.append((volumes[mount["name"]]["secret"]["secretName"], mount["mountPath"]))
                        continue
                    empty_dir = volumes[mount["name"]].get("emptyDir")
                    if empty_dir is None:
                        raise ValueError(f"{workload}: volume {mount['name']} is not an emptyDir; rehearse it")
                    mounts.append(
                        Volume(
                            name=mount["name"],
                            mount_path=mount["mountPath"],
                            size_bytes=size_bytes(empty_dir["sizeLimit"]),
                            in_memory=empty_dir.get("medium") == "Memory",
                        )
                    )
                found.append(
                    Container(
                        workload=workload,
                        namespace=manifest["metadata"].get("namespace", "default"),
                        name=item["name"],
                        init=init,
                        image=item["image"],
                        command=tuple(item["command"]) if "command" in item else None,
                        args=tuple(item["args"]) if "args" in item else None,
                        env=_env(item, f"{manifest['metadata']['name']}-rehearsal"),
                        volumes=tuple(mounts),
                        run_as_user=security["runAsUser"],
                        run_as_group=security.get("runAsGroup", security["runAsUser"]),
                        read_only_root=bool(security.get("readOnlyRootFilesystem")),
                        # Kubernetes mounts the token unless the pod (or its ServiceAccount) says no.
                        service_account_token=pod.get("automountServiceAccountToken", True) is not False,
                        readiness=_readiness(item),
                        pod_spec=pod,
                        secrets=tuple(secrets),
                    )
                )
    return found
