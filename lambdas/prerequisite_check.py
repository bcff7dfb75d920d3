"""Custom resource that fails the deploy when a prerequisite expected on a team's cluster is missing.

One resource per prerequisite set to `expect` (cdk/prerequisites.py lists what each must show). On Create and
Update it reads each object of the prerequisite from the Kubernetes API, with a token of the Lambda's own role
(the team's admin-mapped kubectl role), and fails with one line naming the prerequisite, what is wrong and the
setting that installs ours. Delete does nothing: nothing was made.

Properties:
    ClusterName: the cluster's name (its endpoint and CA come from eks:DescribeCluster)
    Prerequisite: what it is, as the message names it ("Karpenter v1 (karpenter)")
    Setting: the setting that installs ours instead (existingClusterKarpenter)
    Probes: [{Resource, Name, Path, Namespace?, Serves?, Controller?}, ...] the objects it must show
    Version: {Path, Minimum, Why} (optional) a Deployment list whose images must be Minimum or newer; an image
        whose tag names no release, or no Deployment listed, passes: the check fails only on what it can tell
`problem` and `message` are also what cdk/prerequisites.py and `make verify` report, so the three say the same.
Plain boto3 and the standard library, so it runs on the stock Lambda runtime (CDK provider framework, onEvent).
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.signers import RequestSigner

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

PHYSICAL_ID = "prerequisite-check"
# The EKS token format of the AWS CLI (aws/aws-cli awscli/customizations/eks/get_token.py): a presigned STS
# GetCallerIdentity URL carrying the cluster's name in the signed x-k8s-aws-id header, base64url without padding.
TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - the token format's prefix, not a secret
CLUSTER_HEADER = "x-k8s-aws-id"
TOKEN_EXPIRES_S = 60
HTTP_TIMEOUT_S = 20


class PrerequisiteMissing(Exception):
    """A prerequisite is missing or not what the manifests need: the message is the line the deploy shows."""


def problem(probe: Mapping[str, Any], found: Mapping[str, Any] | None) -> str | None:
    """What is wrong with one object as read (None when it will do); `found` None: it does not exist.

    `probe` has Resource (kubectl's plural), Name, and optionally Namespace, Serves (a CRD version that must be
    served) and Controller (an IngressClass's spec.controller)."""
    name, namespace = probe["Name"], probe.get("Namespace")
    if found is None:
        where = f" in {namespace}" if namespace else ""
        resource = str(probe["Resource"])
        kind = resource[:-2] if resource.endswith("sses") else resource.removesuffix("s")  # ingressclasses, daemonsets
        return f"no {kind} {name}{where}"
    spec = found.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    serves = probe.get("Serves")
    if serves:
        versions = spec.get("versions") or []
        served = {v.get("name") for v in versions if isinstance(v, Mapping) and v.get("served")}
        if serves not in served:
            return f"{name} serves {sorted(str(v) for v in served)}, not {serves}"
    controller = probe.get("Controller")
    if controller and spec.get("controller") != controller:
        return f"ingressclass {name} is {spec.get('controller')!r}, not {controller}"
    return None


def version_of(image: str) -> tuple[int, ...] | None:
    """The release an image's tag names (`...:v2.13.0`, `...:v2.13.0-linux_amd64`), None when it names none."""
    tag = image.rpartition("/")[2].partition(":")[2].removeprefix("v")
    numbers = tag.split("-")[0].split(".")
    return tuple(int(n) for n in numbers) if len(numbers) == 3 and all(n.isdigit() for n in numbers) else None


def version_problem(version: Mapping[str, Any], deployments: Mapping[str, Any]) -> str | None:
    """What is too old among the Deployments a `Version` probe listed (None when each will do, or none names a
    release: the check cannot tell, so it does not fail). `version` has Minimum ("v2.4.0") and Why."""
    minimum = version_of(":" + str(version["Minimum"]))
    for item in deployments.get("items") or []:
        containers = item.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
        for container in containers:
            found = version_of(str(container.get("image", "")))
            if found is not None and minimum is not None and found < minimum:
                name, tag = item.get("metadata", {}).get("name"), container["image"].rpartition(":")[2]
                return f"{name} runs {tag}, older than {version['Minimum']} ({version['Why']})"
    return None


def message(prerequisite: str, setting: str, found_problem: str) -> str:
    """The one line a failed check reports: the prerequisite, what is wrong, and the setting that installs ours."""
    return f"{prerequisite} is expected but {found_problem}: install it, or set {setting}=install"


def eks_token(cluster_name: str, session: boto3.Session) -> str:
    """A bearer token for the cluster's API as the session's identity (the AWS CLI's `eks get-token`)."""
    region = session.region_name
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(
        sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(), session.events
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {CLUSTER_HEADER: cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=TOKEN_EXPIRES_S,
        operation_name="",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class ClusterApi:
    """GETs on one cluster's Kubernetes API over TLS pinned to the cluster's own CA."""

    def __init__(self, endpoint: str, ca_pem: bytes, token: str) -> None:
        if not endpoint.startswith("https://"):
            raise PrerequisiteMissing(f"the cluster's API endpoint {endpoint!r} is not an https:// URL")
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.tls = ssl.create_default_context(cadata=ca_pem.decode())

    @classmethod
    def connect(cls, cluster_name: str, session: boto3.Session) -> ClusterApi:
        """The API of the named cluster, as the session's identity."""
        cluster = session.client("eks").describe_cluster(name=cluster_name)["cluster"]
        ca_pem = base64.b64decode(cluster["certificateAuthority"]["data"])
        return cls(cluster["endpoint"], ca_pem, eks_token(cluster_name, session))

    def get(self, path: str) -> dict[str, Any] | None:
        """The object at `path`, or None when the API says it does not exist."""
        # The endpoint is https:// (checked above): no file: or custom scheme reaches urlopen.
        request = urllib.request.Request(  # noqa: S310
            self.endpoint + path, headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=self.tls) as response:  # noqa: S310
                found: dict[str, Any] = json.load(response)
                return found
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            # 401/403: the kubectl role cannot read it; the check cannot conclude, so it says so and fails.
            raise PrerequisiteMissing(f"reading {path} from the cluster's API answered HTTP {exc.code}") from exc


def check(props: Mapping[str, Any], api: ClusterApi) -> None:
    """Raise PrerequisiteMissing with the one-line message at the first probe that finds a problem."""
    found_problems = (problem(probe, api.get(probe["Path"])) for probe in props["Probes"])
    found_problem = next((p for p in found_problems if p is not None), None)
    version = props.get("Version")
    if found_problem is None and version:
        found_problem = version_problem(version, api.get(version["Path"]) or {})
    if found_problem is not None:
        raise PrerequisiteMissing(message(props["Prerequisite"], props["Setting"], found_problem))


def on_event(event: Mapping[str, Any], context: object) -> dict[str, Any]:
    """The provider framework's onEvent: Create and Update check, Delete has nothing to undo."""
    LOG.info(json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}))
    if event["RequestType"] in ("Create", "Update"):
        props = event["ResourceProperties"]
        check(props, ClusterApi.connect(props["ClusterName"], boto3.Session()))
    return {"PhysicalResourceId": PHYSICAL_ID}
