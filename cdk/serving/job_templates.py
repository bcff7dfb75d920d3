"""Jobs run on demand: a suspended CronJob holds a Job spec, and one command makes a Job of it.

A suspended CronJob never runs by itself; `kubectl create job NAME --from=cronjob/CRONJOB` copies its
spec.jobTemplate.spec into a new Job and never reads `suspend` (kubectl's createJobFromCronJob in
pkg/cmd/create/create_job.go). The Neuron compile Jobs keep theirs to re-run a failed compile; a workload's
benchmark may run only this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cdk.checkov import k8s_skip_annotations

# A valid schedule is required even when suspended; the CronJob never runs on its own.
NEVER_SCHEDULE: Final = "0 0 1 1 *"


def suspended_cronjob(
    name: str,
    namespace: str,
    *,
    labels: Mapping[str, str],
    job_spec: Mapping[str, Any],
    checkov_skips: Mapping[str, str],
) -> dict[str, Any]:
    """A CronJob that never runs on its own, holding `job_spec` for `kubectl create job --from=cronjob/<name>`."""
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": k8s_skip_annotations(checkov_skips),
        },
        "spec": {
            "schedule": NEVER_SCHEDULE,
            "suspend": True,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"metadata": {"labels": dict(labels)}, "spec": dict(job_spec)},
        },
    }


def create_job_command(name: str, namespace: str, suffix: str) -> str:
    """`kubectl create job --from=cronjob/<name>`: a new Job `<name>-<suffix>-<epoch seconds>` from its spec."""
    return f"kubectl -n {namespace} create job --from=cronjob/{name} {name}-{suffix}-$(date +%s)"
