"""The compile-once pattern (`CompileJob`): a Kubernetes Job on a Neuron node that compiles a model once into
the model store, and a suspended CronJob with the same pod template to re-run a failed compile. Each workload
that compiles for Neuron builds its compile Job from it (cdk/image/neuron_compile_job.py is one).

A Job's pod template is immutable, so the Job's name carries a hash of what it compiles and how
(model, SDK version, shape, image, node size): a change creates a new Job instead of failing the
update, and an unchanged deploy leaves the finished Job alone.

The pod carries `karpenter.sh/do-not-disrupt: "true"` so consolidation does not take the node away
mid-compile; a finished (Succeeded/Failed) pod no longer blocks, so the node is then reclaimed
(aws/karpenter-provider-aws website/content/en/v1.14/concepts/disruption.md at 388ed61, "Pod-Level Controls").

The suspended CronJob (cdk/serving/job_templates.py) never runs by itself; a failed compile is re-run with:
    kubectl -n <namespace> create job --from=cronjob/<name> <name>-rerun-$(date +%s)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cdk import versions
from cdk.accelerators import NEURON, needs_neuron_scheduler
from cdk.checkov import k8s_skip_annotations
from cdk.instance_types import InstanceType
from cdk.serving.job_templates import create_job_command, suspended_cronjob
from cdk.serving.pod_fit import FitSettings, pinned_and_fitting
from cdk.serving.pod_shape import POD_CHECKOV_SKIPS

# Karpenter's pod annotation that blocks voluntary disruption (consolidation, drift) of the pod's node.
DO_NOT_DISRUPT: Final = {"karpenter.sh/do-not-disrupt": "true"}
BACKOFF_LIMIT: Final = 2
TTL_AFTER_FINISHED_S: Final = 7 * 24 * 3600


# A CDK token's placeholder in a synth-time string: `${Token[AWS.AccountId.8]}`, `${Token[TOKEN.123]}`.
_TOKEN_NUMBER = re.compile(r"(\$\{Token\[[^\]]*?)\.\d+(\]\})")


def hashed_name(base: str, key: str) -> str:
    """`<base>-<first 10 hex digits of sha256(key)>`: a Job name that changes whenever `key` does.

    Unresolved values in `key` (the account and region in an image URI, the bucket's name) are CDK token
    placeholders whose numbers follow the order the app created its tokens in, so an unrelated change to
    the app would renumber them and rename the Job (a new compile). Their numbers are left out: what they
    stand for is fixed for one deployment.
    """
    stable = _TOKEN_NUMBER.sub(r"\1\2", key)
    return f"{base}-{hashlib.sha256(stable.encode()).hexdigest()[:10]}"


def neuron_resources(*, cpu: float, memory_gi: int, devices: int) -> dict[str, Any]:
    """A compile container's requests/limits: `devices` Neuron chips, and CPU and memory that only a node fit to
    compile has (extended resources need limit == request; no CPU limit, memory limited)."""
    return {
        "requests": {"cpu": f"{cpu:g}", "memory": f"{memory_gi}Gi", NEURON.resource_name: devices},
        "limits": {"memory": f"{memory_gi}Gi", NEURON.resource_name: devices},
    }


@dataclass(frozen=True)
class CompileJob:
    """One compile-once Job on a Neuron node, as the pattern above describes: its pod, and the objects around it.

    `name` names the ServiceAccount, the pods' label and the re-run CronJob; the Job's own name is that plus a
    hash of its inputs (`job(name)`), given by the caller or, by default, of the whole Job spec
    (`content_name()`). `devices`: the Neuron chips its pod asks for; more than one needs the scheduler
    extension (cdk/accelerators.py needs_neuron_scheduler).
    """

    name: str
    namespace: str
    timeout_s: int
    pod_security: Mapping[str, Any]
    containers: Sequence[dict[str, Any]]
    volumes: Sequence[dict[str, Any]]
    init_containers: Sequence[dict[str, Any]] = ()
    devices: int = 1
    # The instance the pod is pinned to and must fit (cdk/serving/pod_fit.py), with the settings that size it;
    # None: any node of the Neuron pool that fits.
    pinned: tuple[InstanceType, FitSettings] | None = None

    @property
    def labels(self) -> dict[str, str]:
        """The labels of the Job, the CronJob and their pods."""
        return {"app.kubernetes.io/name": self.name}

    def spec(self) -> dict[str, Any]:
        """The Job spec shared by the Job and the re-run CronJob."""
        pod: dict[str, Any] = {
            "restartPolicy": "Never",
            "serviceAccountName": self.name,
            "automountServiceAccountToken": False,  # no Kubernetes API calls; Pod Identity has its own
            "securityContext": dict(self.pod_security),
        }
        if self.init_containers:
            pod["initContainers"] = list(self.init_containers)
        pod |= {
            "containers": list(self.containers),
            "volumes": list(self.volumes),
            "nodeSelector": NEURON.node_label,
            "tolerations": [NEURON.toleration],
        }
        if needs_neuron_scheduler(NEURON, self.devices):
            pod["schedulerName"] = versions.NEURON_SCHEDULER_NAME
        if self.pinned is not None:
            pod = pinned_and_fitting(pod, *self.pinned)
        return {
            "backoffLimit": BACKOFF_LIMIT,
            "activeDeadlineSeconds": self.timeout_s,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
            "template": {
                "metadata": {"labels": self.labels, "annotations": dict(DO_NOT_DISRUPT)},
                "spec": pod,
            },
        }

    def content_name(self) -> str:
        """`<name>-<hash of the whole Job spec>`: any change to the pod template names a new Job."""
        return hashed_name(self.name, json.dumps(self.spec(), sort_keys=True))

    def job(self, job_name: str | None = None) -> dict[str, Any]:
        """The Job (named `job_name`, by default `content_name()`)."""
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": job_name or self.content_name(),
                "namespace": self.namespace,
                "labels": self.labels,
                "annotations": k8s_skip_annotations(POD_CHECKOV_SKIPS),
            },
            "spec": self.spec(),
        }

    def rerun_cronjob(self) -> dict[str, Any]:
        """A suspended CronJob holding the same Job spec: `kubectl create job --from=cronjob/...` re-runs it."""
        return suspended_cronjob(
            self.name, self.namespace, labels=self.labels, job_spec=self.spec(), checkov_skips=POD_CHECKOV_SKIPS
        )

    def rerun_command(self) -> str:
        """The one command that re-runs a failed compile."""
        return rerun_command_for(self.name, self.namespace)

    def service_account(self) -> dict[str, Any]:
        """The Job's ServiceAccount (its IAM role comes from an EKS Pod Identity association)."""
        return service_account_for(self.name, self.namespace)


def rerun_command_for(name: str, namespace: str) -> str:
    """`kubectl create job --from=cronjob/<name>`: a new Job from the suspended CronJob's spec."""
    return create_job_command(name, namespace, "rerun")


def service_account_for(name: str, namespace: str) -> dict[str, Any]:
    """A compile Job's ServiceAccount: no API token mounted (Pod Identity brings its own credentials)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
        "automountServiceAccountToken": False,
    }
