"""The LLM benchmark as a Job per accelerator: `python -m llm_bench` (part 1's command) from inside the cluster,
against one accelerator's LLM Service, so each accelerator gets its own figures.

Each accelerator has a suspended CronJob (cdk/serving/job_templates.py) holding the Job; `python -m
llm_bench.cluster` (make bench-llm-cluster, the `LlmBenchmarkCommand` output) holds the Deployment at one
replica, hands the Job a sign-in token, runs it, and collects its section. The pod:

- runs the gateway image (which ships `llm_bench`: httpx only, no vLLM), on the system nodes, read-only root;
- calls `http://<llm-neuron|llm-gpu>.<namespace>.svc.cluster.local` (the Service's port 80, the gateway's 8000),
  which the LLM pods' NetworkPolicy admits from pods labelled NAME_LABEL only (`allow_from_benchmark`);
- signs in with the token the command puts in the Secret TOKEN_SECRET (read again for each request, so the
  command can renew it during a long run); with `authMode` none there is no token and no Secret;
- measures the settings' shape (llmBenchmarkInputTokens / llmBenchmarkOutputTokens) at the engine's batch
  (llmMaxNumSeqs), then sweeps the concurrency up to it with its own client (`vllm bench serve` needs vLLM):
  the sweep's best goodput within the SLO (TTFT at most alarmTtftP90Ms) is the figure for
  llmRequestsPerMinute<Acc>, and with the replica's price (its llmInstanceType<Acc>'s, or llmPricePerHour<Acc>)
  the cost per million output tokens.

The overhead part of the benchmark (the engine called directly) is left out: vLLM listens only on a Unix socket
inside its pod (cdk/llm/names.py ENGINE_SOCKET).
"""

from __future__ import annotations

from typing import Any, Final

from cdk.accelerators import Accelerator
from cdk.config.llm import LlmConfig, requests_per_minute_key
from cdk.config.serving import ServingConfig
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.llm.names import GATEWAY_PORT, deployment_name
from cdk.llm.workload import APP_LABEL
from cdk.llm.workload import POD_CHECKOV_SKIPS as LLM_POD_SKIPS
from cdk.serving.job_templates import suspended_cronjob
from cdk.serving.network_policy import allow_port
from cdk.serving.pod_shape import INSTANCE_LABEL_KEY, TMP_DIR, container_security_context, pod_security_context
from llm_bench.job import CONTAINER, CRONJOB_SUFFIX, NAME_LABEL, TOKEN_FLAG, TOKEN_KEY, TOKEN_SECRET

TOKEN_DIR: Final = "/run/secrets/llm-bench"  # noqa: S105  # a folder's name, beside the ServiceAccount token's
NETWORK_POLICY_NAME: Final = "allow-llm-gateway-from-benchmark"
# The client: asyncio streams, well under one core even at 8x the batch in flight.
RESOURCES: Final = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
TTL_AFTER_FINISHED_S: Final = 24 * 3600  # its logs stay a day after the command has read them
# Checkov findings on the benchmark's pods that are the design (tests/cdk/test_checkov.py).
CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit on purpose: a CFS quota would pause the client mid-stream and add its pauses to the "
    "latencies it measures; the CPU request reserves its share and memory is limited.",
    "CKV_K8S_15": LLM_POD_SKIPS["CKV_K8S_15"],
    "CKV_K8S_43": LLM_POD_SKIPS["CKV_K8S_43"],
}


def cronjob_name(acc: Accelerator) -> str:
    """The benchmark's CronJob (and its Jobs' prefix) on `acc`."""
    return deployment_name(acc) + CRONJOB_SUFFIX


def service_url(acc: Accelerator, cfg: ServingConfig) -> str:
    """`acc`'s LLM Service from inside the cluster (port 80: no port in the URL)."""
    return f"http://{deployment_name(acc)}.{cfg.namespace}.svc.cluster.local"


def sweep_points(max_num_seqs: int) -> str:
    """1, 2, 4, ... up to the engine's batch, and the batch itself."""
    points, n = [], 1
    while n < max_num_seqs:
        points.append(n)
        n *= 2
    return ",".join(str(p) for p in [*points, max_num_seqs])


def bench_args(acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, *, signed_in: bool) -> list[str]:
    """`python -m llm_bench`'s arguments for one replica on `acc`."""
    per = llm.per_accelerator[acc.name]
    args = [
        f"--gateway-url={service_url(acc, cfg)}",
        f"--model={llm.served_model_name}",
        f"--device={acc.name}, one {deployment_name(acc)} replica, tensor parallel {per.tensor_parallel}",
        f"--input-tokens={llm.benchmark_input_tokens}",
        f"--output-tokens={llm.benchmark_output_tokens}",
        f"--concurrency={llm.max_num_seqs}",
        f"--max-num-seqs={llm.max_num_seqs}",
        f"--sweep={sweep_points(llm.max_num_seqs)}",
        "--sweep-client=builtin",
        f"--slo-ttft-ms={llm.alarm_ttft_p90_ms:g}",
        f"--price-per-hour={per.price_per_hour:g}",
        f"--per-replica-setting={requests_per_minute_key(acc.name)}",
    ]
    if signed_in:
        args.append(f"{TOKEN_FLAG}={TOKEN_DIR}/{TOKEN_KEY}")
    return args


def labels(acc: Accelerator) -> dict[str, str]:
    """The CronJob's, its Jobs' and their pods' labels."""
    return {**NAME_LABEL, INSTANCE_LABEL_KEY: cronjob_name(acc)}


def job_spec(acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, *, image: str, signed_in: bool) -> dict[str, Any]:
    """The benchmark Job's spec on `acc`: one try (a benchmark that failed halfway is not retried behind your back)."""
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": TMP_DIR}]
    if signed_in:
        # Readable by the pod's group (fsGroup) only; the pod waits until the command has written the Secret.
        volumes.append({"name": "token", "secret": {"secretName": TOKEN_SECRET, "defaultMode": 0o440}})
        mounts.append({"name": "token", "mountPath": TOKEN_DIR, "readOnly": True})
    container = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "llm_bench"],
        "args": bench_args(acc, llm, cfg, signed_in=signed_in),
        "env": [{"name": "HOME", "value": TMP_DIR}],
        "resources": RESOURCES,
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    return {
        "backoffLimit": 0,
        "activeDeadlineSeconds": llm.benchmark_timeout_s,
        "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
        "template": {
            "metadata": {"labels": labels(acc)},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,  # no Kubernetes API calls, no AWS calls
                "securityContext": pod_security_context(cfg),
                "nodeSelector": dict(SYSTEM_NODE_LABEL),
                "containers": [container],
                "volumes": volumes,
            },
        },
    }


def cronjob(acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, *, image: str, signed_in: bool) -> dict[str, Any]:
    """The suspended CronJob holding the benchmark Job on `acc`."""
    return suspended_cronjob(
        cronjob_name(acc),
        cfg.namespace,
        labels=labels(acc),
        job_spec=job_spec(acc, llm, cfg, image=image, signed_in=signed_in),
        checkov_skips=CHECKOV_SKIPS,
    )


def allow_from_benchmark(cfg: ServingConfig) -> dict[str, Any]:
    """The LLM pods: TCP to the gateway's port from the benchmark's pods."""
    return allow_port(
        cfg,
        name=NETWORK_POLICY_NAME,
        pods=APP_LABEL,
        port=GATEWAY_PORT,
        peers=[{"podSelector": {"matchLabels": dict(NAME_LABEL)}}],
    )
