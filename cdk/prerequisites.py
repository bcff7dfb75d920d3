"""What the serving stack relies on in a cluster, as objects a check can read: one `Prerequisite` per add-on.

On a team's cluster (existingClusterName) each one is installed by us or expected (cdk/config/existing_cluster.py);
an expected one is checked at deploy time (the additions stack's prerequisite check) and by `make verify`, both
from this table, and a missing one fails with one line naming it and the setting that installs ours.
No aws-cdk-lib import here: verify/ reads it without starting Node. What a probe finds wrong and the line it
reports are the deploy-time handler's own (lambdas/prerequisite_check.py), so the deploy and verify say the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA
from cdk.config.existing_cluster import ADD_ON_SETTINGS
from lambdas import prerequisite_check


@dataclass(frozen=True)
class Probe:
    """One object the prerequisite puts in the cluster: `kubectl get <resource> <name> [-n namespace]`, and the
    API version it must serve when it is a CustomResourceDefinition (the version our manifests use)."""

    resource: str  # kubectl's plural: customresourcedefinitions, ingressclasses, daemonsets
    name: str
    namespace: str | None = None
    serves: str | None = None  # a CRD's spec.versions[].name that must be served
    controller: str | None = None  # an IngressClass's spec.controller

    @property
    def api_path(self) -> str:
        """The object's path on the Kubernetes API."""
        groups = {
            "customresourcedefinitions": "/apis/apiextensions.k8s.io/v1",
            "ingressclasses": "/apis/networking.k8s.io/v1",
            "daemonsets": "/apis/apps/v1",
        }
        where = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{groups[self.resource]}{where}/{self.resource}/{self.name}"

    def problem(self, found: dict[str, object] | None) -> str | None:
        """What is wrong with the object as read (None when it will do); `found` None: it does not exist."""
        return prerequisite_check.problem(self.as_property(), found)

    def as_property(self) -> dict[str, str]:
        """The probe as the deploy-time check's custom resource takes it (lambdas/prerequisite_check.py)."""
        fields = {
            "Resource": self.resource,
            "Name": self.name,
            "Path": self.api_path,
            "Namespace": self.namespace,
            "Serves": self.serves,
            "Controller": self.controller,
        }
        return {key: value for key, value in fields.items() if value is not None}


@dataclass(frozen=True)
class VersionProbe:
    """The Deployments (`kubectl get deployments -n namespace --selector selector`) whose images must be `minimum`
    or newer; one whose tag names no release, or none found, passes: the checks fail only on what they can tell."""

    namespace: str
    selector: str  # key=value
    minimum: str
    why: str

    @property
    def api_path(self) -> str:
        """The Deployment list's path on the Kubernetes API."""
        return f"/apis/apps/v1/namespaces/{self.namespace}/deployments?labelSelector={quote(self.selector, safe='')}"

    def as_property(self) -> dict[str, str]:
        """The version probe as the deploy-time check's custom resource takes it."""
        return {"Path": self.api_path, "Minimum": self.minimum, "Why": self.why}

    def problem(self, deployments: dict[str, object]) -> str | None:
        """What is too old among the listed Deployments, None when each will do."""
        return prerequisite_check.version_problem(self.as_property(), deployments)


@dataclass(frozen=True)
class Prerequisite:
    """One add-on the serving stack relies on, its setting, the objects that show it runs and, where a version
    decides whether our manifests work, the Deployments whose version is checked."""

    name: str  # the short name ADD_ON_SETTINGS keys (or a part of the add-on `part_of` names)
    what: str
    probes: tuple[Probe, ...]
    version: VersionProbe | None = None
    part_of: str | None = None  # the add-on whose setting installs this part of it

    @property
    def setting(self) -> str:
        """The setting that chooses install or expect."""
        return ADD_ON_SETTINGS[self.part_of or self.name]

    @property
    def title(self) -> str:
        """What it is and its short name, as the messages name it."""
        return f"{self.what} ({self.name})"

    def message(self, problem: str) -> str:
        """The one line a failed check reports."""
        return prerequisite_check.message(self.title, self.setting, problem)

    def check_properties(self, cluster_name: str) -> dict[str, object]:
        """The deploy-time check's custom resource properties for this prerequisite on `cluster_name`."""
        return {
            "ClusterName": cluster_name,
            "Prerequisite": self.title,
            "Setting": self.setting,
            "Probes": [probe.as_property() for probe in self.probes],
            **({"Version": self.version.as_property()} if self.version else {}),
        }


def _crd(name: str, version: str) -> Probe:
    return Probe("customresourcedefinitions", name, serves=version)


NEURON_SCHEDULER: Final = "neuron-scheduler"

# The API versions are the ones our manifests use: NodePool karpenter.sh/v1 and EC2NodeClass karpenter.k8s.aws/v1
# (cdk/constructs/node_pools.py), ScaledObject/TriggerAuthentication keda.sh/v1alpha1 (cdk/serving/scaling.py),
# the Ingress's class `alb` (cdk/front_door/ingress.py) of the controller `ingress.k8s.aws/alb` (the controller's
# docs, docs/guide/ingress/ingress_class.md). DaemonSet names as cdk/node_fit.py sources them.
PREREQUISITES: Final[tuple[Prerequisite, ...]] = (
    Prerequisite(
        "karpenter",
        "Karpenter v1",
        (_crd("nodepools.karpenter.sh", "v1"), _crd("ec2nodeclasses.karpenter.k8s.aws", "v1")),
    ),
    Prerequisite(
        "load-balancer-controller",
        "the AWS Load Balancer Controller",
        (Probe("ingressclasses", "alb", controller="ingress.k8s.aws/alb"),),
        # Where its chart puts it: the chart's selector label (kubernetes-sigs/aws-load-balancer-controller@v3.2.2
        # helm/aws-load-balancer-controller/templates/_helpers.tpl), in kube-system (docs/deploy/installation.md).
        VersionProbe(
            "kube-system",
            "app.kubernetes.io/name=aws-load-balancer-controller",
            versions.ALB_CONTROLLER_MIN_VERSION,
            "the first to reconcile networking.k8s.io/v1 Ingresses with every annotation ours sets",
        ),
    ),
    Prerequisite(
        "keda",
        "KEDA",
        (_crd("scaledobjects.keda.sh", "v1alpha1"), _crd("triggerauthentications.keda.sh", "v1alpha1")),
    ),
    Prerequisite(
        "nvidia-device-plugin",
        "the NVIDIA device plugin",
        (Probe("daemonsets", "nvidia-device-plugin", namespace="kube-system"),),
    ),
    Prerequisite(
        "neuron", "the Neuron device plugin", (Probe("daemonsets", "neuron-device-plugin", namespace="kube-system"),)
    ),
    # The Neuron chart's second scheduler, which pods asking for more than one Neuron device name (cdk/versions.py
    # NEURON_SCHEDULER_NAME: the chart's scheduler.customScheduler.fullnameOverride), in the chart's namespace.
    Prerequisite(
        NEURON_SCHEDULER,
        "the Neuron scheduler extension",
        (Probe("deployments", versions.NEURON_SCHEDULER_NAME, namespace="kube-system"),),
        part_of="neuron",
    ),
    Prerequisite(
        "pod-identity-agent",
        "the EKS Pod Identity agent",
        (Probe("daemonsets", "eks-pod-identity-agent", namespace="kube-system"),),
    ),
    Prerequisite(
        "cloudwatch-agent",
        "the CloudWatch agent (Container Insights)",
        (Probe("daemonsets", "cloudwatch-agent", namespace="amazon-cloudwatch"),),
    ),
)
BY_NAME: Final = {p.name: p for p in PREREQUISITES}
# The device plugins an accelerator needs: relied on only while that accelerator is enabled.
PLUGIN_ACCELERATOR: Final = {"nvidia-device-plugin": NVIDIA.name, "neuron": NEURON.name}


def relied_on(expected: Iterable[str], accelerators: Iterable[str], neuron_scheduler: bool = False) -> tuple[str, ...]:
    """The expected prerequisites a deploy with these accelerators relies on: what is checked, and listed. The
    Neuron chart's scheduler extension is relied on with the chart where pods ask for several Neuron devices
    (`neuron_scheduler`: cdk/accelerators.py needs_neuron_scheduler)."""
    enabled = set(accelerators)
    names = [name for name in expected if PLUGIN_ACCELERATOR.get(name, "") in ("", *enabled)]
    if neuron_scheduler and "neuron" in names:
        names.insert(names.index("neuron") + 1, NEURON_SCHEDULER)
    return tuple(names)
