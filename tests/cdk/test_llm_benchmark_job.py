"""The LLM benchmark as a Job per accelerator (cdk/llm/benchmark_job.py) in the shipped synth: a suspended CronJob
per accelerator whose pod reaches that accelerator's gateways and nothing else reaches, arguments the benchmark's
own parser accepts and that follow the settings, and an output that is the one command to run it."""

from __future__ import annotations

import shlex

from cdk.accelerators import NEURON, NVIDIA
from cdk.llm import benchmark_job
from cdk.llm.names import GATEWAY_PORT, deployment_name
from cdk.llm.workload import APP_LABEL
from llm_bench import __main__ as bench_cli
from llm_bench import cluster
from llm_bench.job import CONTAINER, NAME_LABEL, TOKEN_FLAG
from tests.cdk.conftest import DEFAULT_CONTEXT
from tests.cdk.test_llm_workload import GATEWAY_IMAGE, configs


def objects(serving, kind):
    return {m["metadata"]["name"]: m for m in serving.manifests if m["kind"] == kind}


def pod_of(cronjob):
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]


def test_each_accelerator_has_a_benchmark_that_never_runs_on_its_own(serving):
    cronjobs = objects(serving, "CronJob")
    for acc in serving.platform.accelerators:
        cronjob = cronjobs[benchmark_job.cronjob_name(acc)]
        assert cronjob["spec"]["suspend"] is True and cronjob["spec"]["concurrencyPolicy"] == "Forbid"
        job = cronjob["spec"]["jobTemplate"]["spec"]
        assert job["backoffLimit"] == 0  # a half-run benchmark is not retried behind the user's back
        assert job["activeDeadlineSeconds"] == serving.llm.benchmark_timeout_s
        pod = pod_of(cronjob)
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == NAME_LABEL["app.kubernetes.io/name"]
        spec = pod["spec"]
        (container,) = spec["containers"]
        assert container["name"] == CONTAINER and container["command"] == ["python", "-m", "llm_bench"]
        # The gateway image (httpx, no vLLM), as the LLM pods' gateway runs it.
        deployment = objects(serving, "Deployment")[deployment_name(acc)]["spec"]["template"]["spec"]
        (gateway,) = [c for c in deployment["containers"] if c["name"] == "gateway"]
        assert container["image"] == gateway["image"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
        assert "tolerations" not in spec  # never on an accelerator node


def test_the_benchmark_pods_reach_the_llm_gateways_and_only_they_are_admitted(serving):
    policies = objects(serving, "NetworkPolicy")
    policy = policies[benchmark_job.NETWORK_POLICY_NAME]["spec"]
    assert policy["podSelector"]["matchLabels"] == APP_LABEL
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": GATEWAY_PORT}]
    assert rule["from"] == [{"podSelector": {"matchLabels": NAME_LABEL}}]
    # No policy admits anything to the benchmark's own pods: the namespace's default denies them.
    for name, other in policies.items():
        selected = other["spec"]["podSelector"].get("matchLabels", {})
        assert not selected or selected.items() - NAME_LABEL.items(), name
    # The URL it calls is the accelerator's Service, whose pods are the LLM pods.
    services = objects(serving, "Service")
    for acc in serving.platform.accelerators:
        (container,) = pod_of(objects(serving, "CronJob")[benchmark_job.cronjob_name(acc)])["spec"]["containers"]
        url = f"http://{deployment_name(acc)}.{serving.config.namespace}.svc.cluster.local"
        assert f"--gateway-url={url}" in container["args"]
        selector = services[deployment_name(acc)]["spec"]["selector"]
        assert selector.items() >= APP_LABEL.items()


def test_its_arguments_are_the_benchmarks_own_and_follow_the_settings(serving):
    llm = serving.llm
    for acc in serving.platform.accelerators:
        (container,) = pod_of(objects(serving, "CronJob")[benchmark_job.cronjob_name(acc)])["spec"]["containers"]
        args = bench_cli.parse_args(container["args"])  # the program's own parser: an unknown flag would stop it
        per = llm.per_accelerator[acc.name]
        assert (args.input_tokens, args.output_tokens) == (llm.benchmark_input_tokens, llm.benchmark_output_tokens)
        assert args.concurrency == args.max_num_seqs == llm.max_num_seqs
        assert args.sweep.split(",")[-1] == str(llm.max_num_seqs) and args.sweep_client == "builtin"
        assert args.engine_url is None and args.model == llm.served_model_name
        assert args.price_per_hour == per.price_per_hour and args.slo_ttft_ms == llm.alarm_ttft_p90_ms
        assert args.per_replica_setting == f"llmRequestsPerMinute{acc.name.capitalize()}"
        assert args.per_replica_setting in DEFAULT_CONTEXT  # a real setting a user can paste the figure into
        # Sign-in is on: the token comes from the Secret volume, as a file.
        pod = pod_of(objects(serving, "CronJob")[benchmark_job.cronjob_name(acc)])
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mount = next(m for m in container["volumeMounts"] if m["name"] == "token")
        assert str(args.token_file) == f"{mount['mountPath']}/{benchmark_job.TOKEN_KEY}"
        assert volumes["token"]["secret"]["secretName"] == benchmark_job.TOKEN_SECRET and mount["readOnly"]


def test_without_sign_in_the_job_has_no_token_and_no_secret():
    llm, cfg = configs()
    for acc in (NEURON, NVIDIA):
        spec = benchmark_job.job_spec(acc, llm, cfg, image=GATEWAY_IMAGE, signed_in=False)["template"]["spec"]
        (container,) = spec["containers"]
        assert not [a for a in container["args"] if a.startswith(TOKEN_FLAG)]
        assert not [v for v in spec["volumes"] if "secret" in v]


def test_the_sweep_climbs_in_powers_of_two_to_the_batch():
    assert benchmark_job.sweep_points(8) == "1,2,4,8"
    assert benchmark_job.sweep_points(24) == "1,2,4,8,16,24"
    assert benchmark_job.sweep_points(1) == "1"


def test_the_output_is_the_one_command_and_its_arguments_are_the_commands_own(serving):
    ((_, output),) = serving.template.find_outputs("LlmBenchmarkCommand").items()
    words = shlex.split(output["Value"])
    assert words[:2] == ["make", "bench-llm-cluster"]
    (bench_args,) = [w.removeprefix("BENCH_ARGS=") for w in words if w.startswith("BENCH_ARGS=")]
    args = cluster.parse_args(shlex.split(bench_args))
    assert args.stack == "SdOnEksServing" and args.namespace == serving.config.namespace
    assert args.region  # the stack's own region, not the caller's default
