"""The LLM pods' manifests (cdk/llm/workload.py), read as Kubernetes reads them: what each container runs, where it
may write, what it asks for, and that the gateway's environment is one the gateway starts with."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

from cdk import versions
from cdk.accelerators import ACCELERATORS, NEURON, NVIDIA, Accelerator
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.front_door.sign_in import CONFIG_MAP_NAME
from cdk.image import workload as sd
from cdk.llm import workload
from cdk.llm.engine import NEURON_BLOCK_SIZE, engine_args
from cdk.llm.names import ENGINE_SOCKET, ENGINE_SOCKET_DIR, GATEWAY_PORT
from cdk.llm.presets import PRESETS
from cdk.serving import pod_shape
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL
from cdk.serving.routing import PORT_NAME, SERVICE_PORT
from common.auth import env as auth_env
from common.probe_paths import HEALTH_PATH, READINESS_PATH
from llm_gateway.settings import GatewaySettings, load_settings
from tests.cdk.conftest import DEFAULT_CONTEXT

REGION = "us-west-2"
BUCKET = "model-store-bucket"
WEIGHTS_PREFIX = "models/qwen--qwen2.5-1.5b-instruct/"
ARTIFACTS_PREFIX = "compiled-llm/qwen--qwen2.5-1.5b-instruct/neuron-sdk-2.28.0/tp2-len4096-seqs8/"
GATEWAY_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/images:llm-gateway-0123abcd"
# Variables that name folders a container writes to (or, on Neuron, reads the compiled artifacts from).
WRITABLE_PATH_VARIABLES = (
    "HOME",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "VLLM_CACHE_ROOT",
    "TRITON_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "NEURON_COMPILE_CACHE_URL",
)


def configs(**overrides: Any) -> tuple[LlmConfig, ServingConfig]:
    llm = LlmConfig.from_context(DEFAULT_CONTEXT | {"llmEnabled": True} | overrides)
    assert llm is not None
    return llm, ServingConfig.from_context(DEFAULT_CONTEXT)


def build(acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, **kwargs: Any) -> dict[str, dict[str, Any]]:
    args: dict[str, Any] = {
        "gateway_image": GATEWAY_IMAGE,
        "vllm_image": versions.VLLM_NEURON_IMAGE if acc is NEURON else versions.VLLM_NVIDIA_IMAGE,
        "bucket": BUCKET,
        "weights_prefix": WEIGHTS_PREFIX,
        "artifacts_prefix": ARTIFACTS_PREFIX if acc is NEURON else None,
        "region": REGION,
        "env_config_maps": (CONFIG_MAP_NAME,),
    } | kwargs
    return {m["kind"]: m for m in workload.manifests(acc, llm, cfg, **args)}


def pod(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return objects["Deployment"]["spec"]["template"]["spec"]


def container(objects: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    spec = pod(objects)
    (found,) = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
    return found


def env_of(item: dict[str, Any]) -> dict[str, str]:
    assert all("value" in e for e in item["env"]), "every variable is a literal: no secrets, no references"
    return {e["name"]: e["value"] for e in item["env"]}


def engine_flags(args: list[str]) -> tuple[str, dict[str, str | None]]:
    """(the model folder, flag -> value or None for a switch) of `vllm serve`'s arguments."""
    model, rest = args[0], args[1:]
    flags: dict[str, str | None] = {}
    i = 0
    while i < len(rest):
        assert rest[i].startswith("--"), rest
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            flags[rest[i]] = rest[i + 1]
            i += 2
        else:
            flags[rest[i]] = None
            i += 1
    return model, flags


def serve_args(acc: Accelerator, objects: dict[str, dict[str, Any]]) -> list[str]:
    """The arguments after `vllm serve`, however the image starts it."""
    args = container(objects, workload.ENGINE_CONTAINER)["args"]
    return args[args.index("serve") + 1 :] if acc is NEURON else args


def mount_of(item: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The deepest volume mount holding `path` in `item`, None for the (read-only) root."""
    holders = [m for m in item.get("volumeMounts", []) if PurePosixPath(path).is_relative_to(m["mountPath"])]
    return max(holders, key=lambda m: len(m["mountPath"]), default=None)


def fetch_pairs(objects: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    args = container(objects, workload.FETCH_CONTAINER)["args"]
    prefixes = [a.split("=", 1)[1] for a in args if a.startswith("--prefix=")]
    dests = [a.split("=", 1)[1] for a in args if a.startswith("--dest=")]
    return list(zip(prefixes, dests, strict=True))


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_engine_flags_are_the_config(acc):
    llm, cfg = configs()
    model, flags = engine_flags(serve_args(acc, build(acc, llm, cfg)))
    assert model == workload.WEIGHTS_DIR
    assert flags["--served-model-name"] == llm.served_model_name
    assert flags["--uds"] == ENGINE_SOCKET and not {"--host", "--port"} & set(flags)  # vLLM: --uds replaces them
    assert flags["--tensor-parallel-size"] == str(llm.per_accelerator[acc.name].tensor_parallel)
    assert flags["--max-num-seqs"] == str(llm.max_num_seqs)
    assert flags["--max-model-len"] == str(llm.max_model_len)
    if acc is NEURON:  # the compiled graph's block layout: contiguous, one block per sequence
        assert "--no-enable-prefix-caching" in flags and flags["--no-enable-prefix-caching"] is None
        assert flags["--num-gpu-blocks-override"] == str(llm.max_num_seqs)
        # The Neuron user guide's value; vllm-neuron replaces it with max-model-len without prefix caching.
        assert flags["--block-size"] == str(NEURON_BLOCK_SIZE)
    else:
        assert not {"--no-enable-prefix-caching", "--num-gpu-blocks-override", "--block-size"} & set(flags)


def test_the_engine_flags_follow_a_changed_config():
    llm, cfg = configs(
        llmMaxModelLen=8192,
        llmMaxNumSeqs=4,
        llmTensorParallelNvidia=2,
        llmInstanceTypeNvidia="g6.12xlarge",
        llmServedModelName="m-1",
    )
    for acc in (NEURON, NVIDIA):
        _, flags = engine_flags(serve_args(acc, build(acc, llm, cfg)))
        assert (flags["--max-model-len"], flags["--max-num-seqs"], flags["--served-model-name"]) == ("8192", "4", "m-1")
    _, flags = engine_flags(serve_args(NVIDIA, build(NVIDIA, llm, cfg)))
    assert flags["--tensor-parallel-size"] == "2"
    _, flags = engine_flags(serve_args(NEURON, build(NEURON, llm, cfg)))
    assert flags["--num-gpu-blocks-override"] == "4"


def test_each_image_clears_the_old_socket_then_starts_as_it_would():
    llm, cfg = configs()
    gpu = container(build(NVIDIA, llm, cfg), workload.ENGINE_CONTAINER)
    neuron = container(build(NEURON, llm, cfg), workload.ENGINE_CONTAINER)
    clear = ["/bin/sh", "-c", workload.CLEAR_SOCKET_THEN, ENGINE_SOCKET]
    # The NVIDIA image's ENTRYPOINT runs `vllm serve "$@"`: the shell runs it with the flags as its arguments.
    assert gpu["command"] == [*clear, versions.VLLM_NVIDIA_ENTRYPOINT]
    assert gpu["args"] == engine_args(NVIDIA, llm, workload.WEIGHTS_DIR, socket=ENGINE_SOCKET)
    # The Neuron image's ENTRYPOINT runs its arguments: it stays, and runs the shell.
    assert "command" not in neuron
    assert neuron["args"] == [
        *clear,
        "vllm",
        "serve",
        *engine_args(NEURON, llm, workload.WEIGHTS_DIR, socket=ENGINE_SOCKET),
    ]
    assert gpu["image"] == versions.VLLM_NVIDIA_IMAGE and neuron["image"] == versions.VLLM_NEURON_IMAGE


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_only_the_engine_and_the_gateway_share_the_engines_socket(acc):
    llm, cfg = configs()
    spec = pod(build(acc, llm, cfg))
    (volume,) = [v for v in spec["volumes"] if v["name"] == workload.ENGINE_SOCKET_VOLUME["name"]]
    assert volume["emptyDir"]["medium"] == "Memory"
    holders = {
        item["name"]
        for item in spec["initContainers"] + spec["containers"]
        for mount in item["volumeMounts"]
        if mount["name"] == volume["name"]
    }
    assert holders == {workload.ENGINE_CONTAINER, workload.GATEWAY_CONTAINER}
    for name in holders:
        mount = mount_of(container(build(acc, llm, cfg), name), ENGINE_SOCKET)
        assert mount is not None and mount["mountPath"] == ENGINE_SOCKET_DIR
        # vLLM binds there; the gateway only connects, and can neither remove nor replace the socket.
        assert mount.get("readOnly", False) is (name == workload.GATEWAY_CONTAINER)


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_every_path_a_container_writes_is_on_a_writable_volume(acc):
    llm, cfg = configs()
    objects = build(acc, llm, cfg)
    spec = pod(objects)
    volumes = {v["name"]: v for v in spec["volumes"]}
    for item in spec["initContainers"] + spec["containers"]:
        assert item["securityContext"]["readOnlyRootFilesystem"] is True, item["name"]
        for mount in item["volumeMounts"]:
            assert "sizeLimit" in volumes[mount["name"]]["emptyDir"], mount
        env = env_of(item)
        for path in [workload_path for name, workload_path in env.items() if name in WRITABLE_PATH_VARIABLES]:
            mount = mount_of(item, path)
            assert mount is not None and not mount.get("readOnly"), f"{item['name']}: {path} is on the read-only root"
        tmp = mount_of(item, pod_shape.TMP_DIR)
        assert tmp is not None and tmp["mountPath"] == pod_shape.TMP_DIR, f"{item['name']}: /tmp is not a volume"
    fetch = container(objects, workload.FETCH_CONTAINER)
    for _, dest in fetch_pairs(objects):
        mount = mount_of(fetch, dest)
        assert mount is not None and mount["name"] == workload.MODEL_VOLUME and not mount.get("readOnly")


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_engine_reads_what_the_init_container_fetched_and_cannot_change_it(acc):
    llm, cfg = configs()
    objects = build(acc, llm, cfg)
    engine = container(objects, workload.ENGINE_CONTAINER)
    model, _ = engine_flags(serve_args(acc, objects))
    reads = {WEIGHTS_PREFIX: model}
    if acc is NEURON:
        reads[ARTIFACTS_PREFIX] = env_of(engine)["NEURON_COMPILED_ARTIFACTS"]
    else:
        assert "NEURON_COMPILED_ARTIFACTS" not in env_of(engine)
    assert dict(fetch_pairs(objects)) == reads
    for folder in reads.values():
        mount = mount_of(engine, folder)
        # Read-only: a mismatched compile would otherwise be redone at scale-out, into this folder.
        assert mount is not None and mount["name"] == workload.MODEL_VOLUME and mount["readOnly"] is True


def test_neuron_waits_for_the_compile_before_fetching_and_needs_its_prefix():
    llm, cfg = configs()
    args = container(build(NEURON, llm, cfg), workload.FETCH_CONTAINER)["args"]
    assert f"--wait-marker-prefix={ARTIFACTS_PREFIX}" in args
    assert f"--timeout-s={llm.neuron_compile_timeout_s}" in args
    gpu_args = container(build(NVIDIA, llm, cfg), workload.FETCH_CONTAINER)["args"]
    assert not [a for a in gpu_args if a.startswith(("--wait-marker-prefix", "--timeout-s"))]
    with pytest.raises(ValueError, match="compiled artifacts"):
        build(NEURON, llm, cfg, artifacts_prefix=None)


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_model_volume_holds_the_weights_and_on_neuron_the_artifacts(acc):
    llm, cfg = configs(llmModelSizeGi=7)
    volumes = {v["name"]: v for v in pod(build(acc, llm, cfg))["volumes"]}
    expected = 14 if acc is NEURON else 7
    assert volumes[workload.MODEL_VOLUME]["emptyDir"] == {"sizeLimit": f"{expected}Gi"}


def test_shared_memory_only_for_nccl_across_gpus():
    for tp, has_shm in ((1, False), (2, True)):
        llm, cfg = configs(llmTensorParallelNvidia=tp, llmInstanceTypeNvidia="g6.12xlarge")
        objects = build(NVIDIA, llm, cfg)
        shm = mount_of(container(objects, workload.ENGINE_CONTAINER), pod_shape.SHM_DIR)
        assert (shm is not None and shm["mountPath"] == pod_shape.SHM_DIR) is has_shm, tp
        if has_shm:
            (volume,) = [v for v in pod(objects)["volumes"] if v["name"] == shm["name"]]
            assert volume["emptyDir"]["medium"] == "Memory"
    llm, cfg = configs()
    assert mount_of(container(build(NEURON, llm, cfg), workload.ENGINE_CONTAINER), pod_shape.SHM_DIR) is None


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_pod_runs_as_the_projects_non_root_user(acc):
    llm, cfg = configs()
    spec = pod(build(acc, llm, cfg))
    security = spec["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == cfg.run_as_user > 0
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    for item in spec["initContainers"] + spec["containers"]:
        context = item["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_only_the_engine_asks_for_the_accelerator(acc):
    llm, cfg = configs()
    per = llm.per_accelerator[acc.name]
    objects = build(acc, llm, cfg)
    engine = container(objects, workload.ENGINE_CONTAINER)["resources"]
    assert engine["requests"] == {
        "cpu": f"{int(per.cpu * 1000)}m",
        "memory": f"{per.memory_gi}Gi",
        acc.resource_name: per.devices,
    }
    assert engine["limits"] == {"memory": f"{per.memory_gi}Gi", acc.resource_name: per.devices}
    for name in (workload.GATEWAY_CONTAINER, workload.FETCH_CONTAINER):
        resources = container(objects, name)["resources"]
        assert acc.resource_name not in resources["requests"] and "memory" in resources["limits"]
    assert per.devices == 1  # the defaults: TP 2 on one inf2 chip (two NeuronCores), TP 1 on one GPU


def test_the_neuron_scheduler_only_for_more_than_one_device():
    llm, cfg = configs()
    spec = pod(build(NEURON, llm, cfg))
    assert spec["nodeSelector"] == {**NEURON.node_label, INSTANCE_TYPE_LABEL: "inf2.xlarge"}
    assert spec["tolerations"] == [NEURON.toleration]
    assert "schedulerName" not in spec
    llm, cfg = configs(llmTensorParallelNeuron=4, llmInstanceTypeNeuron="inf2.24xlarge")  # two chips
    spec = pod(build(NEURON, llm, cfg))
    assert (
        container(build(NEURON, llm, cfg), workload.ENGINE_CONTAINER)["resources"]["limits"][NEURON.resource_name] == 2
    )
    assert spec["schedulerName"] == versions.NEURON_SCHEDULER_NAME
    llm, cfg = configs(llmTensorParallelNvidia=2, llmInstanceTypeNvidia="g6.12xlarge")
    spec = pod(build(NVIDIA, llm, cfg))
    assert "schedulerName" not in spec
    assert spec["nodeSelector"] == {**NVIDIA.node_label, INSTANCE_TYPE_LABEL: "g6.12xlarge"}


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_gateway_env_is_settings_the_gateway_starts_with(acc, monkeypatch):
    llm, cfg = configs()
    objects = build(acc, llm, cfg)
    gateway = container(objects, workload.GATEWAY_CONTAINER)
    for field in GatewaySettings.model_fields:  # only the manifest's variables count
        monkeypatch.delenv(field.upper(), raising=False)
    for name, value in env_of(gateway).items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    _, flags = engine_flags(serve_args(acc, objects))
    assert settings.upstream_url == f"unix:{flags['--uds']}"
    assert settings.port == GATEWAY_PORT == gateway["ports"][0]["containerPort"]
    assert settings.host == "0.0.0.0"
    assert settings.max_concurrent_requests == llm.gateway_max_concurrent
    assert settings.shutdown_grace_s == cfg.shutdown_grace_s
    assert settings.metrics == cfg.metrics_mode
    assert settings.deployment_unit == objects["Deployment"]["metadata"]["name"]
    assert settings.accelerator == acc.name
    assert settings.chat_page is False and settings.auth == "off"  # sign-in comes from the ConfigMap
    # The gateway lets an idle connection to vLLM go before vLLM would, and keeps it until then.
    engine_env = env_of(container(objects, workload.ENGINE_CONTAINER))
    assert settings.upstream_keep_alive_s == int(engine_env["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]) > 5
    # With the sign-in ConfigMap's keys (cdk/front_door/sign_in.py), the same env turns Cognito on.
    monkeypatch.setenv(auth_env.AUTH, "cognito")
    monkeypatch.setenv(auth_env.AUTH_ISSUER, "https://cognito-idp.us-west-2.amazonaws.com/us-west-2_Abc")
    monkeypatch.setenv(auth_env.AUTH_CLIENT_IDS, "ui-client,api-client")
    assert load_settings().auth_client_id_list == ("ui-client", "api-client")


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_sign_in_comes_from_the_config_maps_as_for_the_image_service(acc):
    llm, cfg = configs()
    gateway = container(build(acc, llm, cfg), workload.GATEWAY_CONTAINER)
    image = sd.deployment(
        ACCELERATORS[acc.name], cfg, image="i", model_uri="s3://b/p", region=REGION, env_config_maps=(CONFIG_MAP_NAME,)
    )
    (sd_container,) = image["spec"]["template"]["spec"]["containers"]
    assert gateway["envFrom"] == sd_container["envFrom"] == [{"configMapRef": {"name": CONFIG_MAP_NAME}}]
    assert "envFrom" not in container(build(acc, llm, cfg, env_config_maps=()), workload.GATEWAY_CONTAINER)
    for item in pod(build(acc, llm, cfg))["initContainers"] + pod(build(acc, llm, cfg))["containers"]:
        if item["name"] != workload.GATEWAY_CONTAINER:
            assert "envFrom" not in item


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_gateway_probes_allow_the_model_load(acc):
    llm, cfg = configs()
    gateway = container(build(acc, llm, cfg), workload.GATEWAY_CONTAINER)
    budget = llm.per_accelerator[acc.name].startup_timeout_s
    startup = gateway["startupProbe"]
    assert startup["httpGet"] == {"path": READINESS_PATH, "port": PORT_NAME}
    allowed = startup["periodSeconds"] * startup["failureThreshold"]
    assert budget <= allowed < budget + startup["periodSeconds"]
    assert gateway["readinessProbe"]["httpGet"] == {"path": READINESS_PATH, "port": PORT_NAME}
    assert gateway["livenessProbe"]["httpGet"] == {"path": HEALTH_PATH, "port": PORT_NAME}
    assert gateway["ports"] == [{"name": PORT_NAME, "containerPort": GATEWAY_PORT, "protocol": "TCP"}]
    engine = container(build(acc, llm, cfg), workload.ENGINE_CONTAINER)
    assert "ports" not in engine  # the engine is on the pod's Unix socket only
    llm_slow, _ = configs(**{f"llmStartupTimeoutSeconds{acc.name.capitalize()}": 3000})
    slow = container(build(acc, llm_slow, cfg), workload.GATEWAY_CONTAINER)["startupProbe"]
    assert slow["periodSeconds"] * slow["failureThreshold"] >= 3000


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_engine_outlives_the_gateways_drain(acc):
    llm, cfg = configs()
    objects = build(acc, llm, cfg)
    grace = pod(objects)["terminationGracePeriodSeconds"]
    gateway_stop = container(objects, workload.GATEWAY_CONTAINER)["lifecycle"]["preStop"]["sleep"]["seconds"]
    engine_stop = container(objects, workload.ENGINE_CONTAINER)["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert gateway_stop == cfg.pre_stop_s  # as the image service: the ALB deregisters first
    assert engine_stop >= gateway_stop + cfg.shutdown_grace_s  # the gateway's streams end before vLLM stops
    assert engine_stop < grace == cfg.termination_grace_s


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_service_targets_the_gateway_of_this_accelerators_llm_pods(acc):
    llm, cfg = configs()
    objects = build(acc, llm, cfg)
    deployment, service = objects["Deployment"], objects["Service"]
    assert (
        service["metadata"]["name"]
        == deployment["metadata"]["name"]
        == {"neuron": "llm-neuron", "nvidia": "llm-gpu"}[acc.name]
    )
    assert service["spec"]["ports"] == [
        {"name": PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
    ]
    selector = service["spec"]["selector"]
    assert (
        selector
        == deployment["spec"]["selector"]["matchLabels"]
        == objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]
    )
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= template_labels.items()
    # Never selected by the image service's Services (its capacity Service selects APP_LABEL).
    assert not sd.APP_LABEL.items() <= template_labels.items()
    assert not sd.APP_LABEL.items() <= service["metadata"]["labels"].items()
    assert objects["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    assert "replicas" not in deployment["spec"]  # KEDA owns it


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_service_account_is_the_pods(acc):
    llm, cfg = configs()
    objects = build(acc, llm, cfg)
    name = workload.service_account_name(acc)
    assert name == f"{objects['Deployment']['metadata']['name']}-sa"
    assert objects["ServiceAccount"]["metadata"]["name"] == pod(objects)["serviceAccountName"] == name
    assert objects["ServiceAccount"]["automountServiceAccountToken"] is False
    assert name != sd.service_account_name(acc)  # not the image service's role
    assert {m["metadata"]["namespace"] for m in objects.values()} == {cfg.namespace}


def test_checkov_skips_carry_their_reasons():
    llm, cfg = configs()
    annotations = build(NVIDIA, llm, cfg)["Deployment"]["metadata"]["annotations"]
    skips = {key: value for key, value in annotations.items() if key.startswith("checkov.io/skip")}
    assert len(skips) == len(workload.POD_CHECKOV_SKIPS)
    for check, reason in workload.POD_CHECKOV_SKIPS.items():
        assert f"{check}={reason}" in skips.values() and len(reason) > 40


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_engine_stays_offline_and_quiet(acc):
    llm, cfg = configs()
    env = env_of(container(build(acc, llm, cfg), workload.ENGINE_CONTAINER))
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1" and env["OPT_OUT_TRACKING"] == "true"
    assert not [name for name in env if any(word in name for word in ("TOKEN", "SECRET", "PASSWORD", "KEY"))]


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
@pytest.mark.parametrize("preset", sorted(PRESETS), ids=str)
def test_each_presets_pods_start_vllm_with_its_tool_call_parser(acc, preset):
    """tool_choice "auto" needs both flags (vLLM's 400 without them); the parser is the preset's."""
    llm, cfg = configs(llmModel=preset, servingHubTokenSecretName="hub-token")
    objects = build(acc, llm, cfg)
    _, flags = engine_flags(serve_args(acc, objects))
    assert "--enable-auto-tool-choice" in flags and flags["--enable-auto-tool-choice"] is None
    assert flags["--tool-call-parser"] == PRESETS[preset].tool_call_parser.value
    # Prefix caching: on where vLLM serves it, off on Neuron (docs/llm-serving.md says why).
    assert ("--enable-prefix-caching" in flags) is (acc is NVIDIA)
    # The gateway refuses structured outputs where the engine would ignore them (the Neuron plugin).
    gateway_env = env_of(container(objects, workload.GATEWAY_CONTAINER))
    assert load_settings(**{"structured_outputs": gateway_env["STRUCTURED_OUTPUTS"]}).structured_outputs is (
        acc is NVIDIA
    )


def test_a_model_without_a_tool_parser_starts_without_auto_tool_choice():
    llm, cfg = configs(llmToolCallParser="none")
    _, flags = engine_flags(serve_args(NVIDIA, build(NVIDIA, llm, cfg)))
    assert not {"--enable-auto-tool-choice", "--tool-call-parser"} & set(flags)
