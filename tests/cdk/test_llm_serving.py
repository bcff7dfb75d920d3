"""LLM serving in the stacks: with llmEnabled (the default test synth) the OpenAI routes reach the LLM Services through
the same Ingress, each Deployment scales on what its own gateway publishes, nothing is applied before what it
needs, and each role reads only the language model's prefixes; with it off (the variant, as cdk.json ships)
nothing of it is in any template."""

from __future__ import annotations

import json

from cdk.llm import compile_job as lcj
from cdk.llm import workload
from cdk.llm.names import deployment_name
from cdk.llm.routes import LLM_ACTION_NAME, LLM_PATHS, LLM_PREFIX_PATHS
from cdk.llm.serving import cost_weights
from cdk.node_fit import allocatable, daemonset_requests, pod_requests
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL
from common.image_api_paths import IMAGES_EDITS_PATH
from common.metrics.recorder import MetricsRecorder
from common.model_store.layout import weights_prefix
from tests.cdk.conftest import resources_of

SERVING = "SdOnEksServing"
LBC = "alb.ingress.kubernetes.io/"


def objects(serving, kind):
    return {m["metadata"]["name"]: m for m in serving.manifests if m["kind"] == kind}


def test_the_openai_routes_go_to_the_llm_services_by_cost_before_the_image_routes(serving):
    (ingress,) = objects(serving, "Ingress").values()
    paths = ingress["spec"]["rules"][0]["http"]["paths"]
    # The image routes' one Exact path (edits, to the pools that edit) is theirs.
    exact = [p for p in paths if p["pathType"] == "Exact" and p["path"] != IMAGES_EDITS_PATH]
    assert [p["path"] for p in exact] == list(LLM_PATHS)
    assert {p["backend"]["service"]["name"] for p in exact} == {LLM_ACTION_NAME}
    # /v1/models/{id}: a Prefix path to the same action, listed (as the controller orders it) before the image's `/`
    # (one per X-Image-Pool route, then the plain one).
    prefixes = [p["path"] for p in paths if p["pathType"] == "Prefix"]
    assert prefixes[: len(LLM_PREFIX_PATHS)] == list(LLM_PREFIX_PATHS)
    assert set(prefixes[len(LLM_PREFIX_PATHS) :]) == {"/"}
    (retrieve,) = [p for p in paths if p["path"] in LLM_PREFIX_PATHS]
    assert retrieve["backend"]["service"]["name"] == LLM_ACTION_NAME
    action = json.loads(ingress["metadata"]["annotations"][f"{LBC}actions.{LLM_ACTION_NAME}"])
    weights = {g["serviceName"]: g["weight"] for g in action["forwardConfig"]["targetGroups"]}
    assert weights == cost_weights(serving.llm, serving.platform.accelerators)
    # The cheaper instance per request gets more: equal requests per minute, and the instances the default preset's
    # pods select: an inf2.xlarge ($0.7582/h) and a g6.xlarge ($0.8048/h).
    assert weights == {"llm-neuron": 51, "llm-gpu": 49}
    services = objects(serving, "Service")
    for name in weights:
        (port,) = services[name]["spec"]["ports"]
        assert port["port"] == 80 and port["targetPort"] == "http"


def test_each_llm_deployment_scales_on_what_its_own_gateway_publishes(serving):
    deployments, scaled = objects(serving, "Deployment"), objects(serving, "ScaledObject")
    for acc in serving.platform.accelerators:
        name = deployment_name(acc)
        containers = deployments[name]["spec"]["template"]["spec"]["containers"]
        (gateway,) = [c for c in containers if c["name"] == workload.GATEWAY_CONTAINER]
        env = {e["name"]: e["value"] for e in gateway["env"]}
        published = MetricsRecorder(env["DEPLOYMENT_UNIT"], env["ACCELERATOR"]).dimensions
        so = scaled[name]["spec"]
        per = serving.llm.per_accelerator[acc.name]
        assert (so["minReplicaCount"], so["maxReplicaCount"]) == (per.min_replicas, per.max_replicas)
        triggers = {t["metadata"]["metricName"]: t for t in so["triggers"]}
        assert set(triggers) == {"QueueDepth", "KvCacheUsage"}
        for trigger in triggers.values():
            md = trigger["metadata"]
            assert dict(zip(md["dimensionName"].split(";"), md["dimensionValue"].split(";"), strict=True)) == published
            assert trigger["metricType"] == "Value" and md["metricStat"] == "Average"
        assert float(triggers["QueueDepth"]["metadata"]["targetMetricValue"]) == per.queue_target
        assert float(triggers["KvCacheUsage"]["metadata"]["targetMetricValue"]) == serving.llm.kv_cache_target_percent


def test_each_synthesized_llm_pod_selects_and_fits_the_instance_it_is_priced_at(serving):
    deployments = objects(serving, "Deployment")
    for acc in serving.platform.accelerators:
        per = serving.llm.per_accelerator[acc.name]
        spec = deployments[deployment_name(acc)]["spec"]["template"]["spec"]
        assert spec["nodeSelector"][INSTANCE_TYPE_LABEL] == per.instance.name
        assert per.price_per_hour == per.instance.usd_per_hour  # what the weights, dashboard and benchmark use
        need, room = pod_requests(spec) + daemonset_requests(acc.name), allocatable(per.instance)
        assert need.cpu_m <= room.cpu_m and need.memory_mib <= room.memory_mib, (acc.name, need, room)


def test_nothing_of_the_llm_is_applied_before_what_it_needs(platform_synth):
    template = platform_synth.raw_templates[SERVING]
    (staging,) = [k for k in resources_of(template, "Custom::ModelStaging") if k.startswith("Llm")]
    kube = resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource")

    def depends(prefix):
        (resource,) = [r for k, r in kube.items() if k.startswith(prefix)]
        return set(resource.get("DependsOn", []))

    (compile_id,) = [k for k in kube if k.startswith("LlmNeuronCompileJob")]
    assert staging in depends("LlmNeuronCompileJob")
    assert {staging, compile_id} <= depends("LlmNeuronWorkload")  # Neuron pods load the compiled artifacts
    assert staging in depends("LlmNvidiaWorkload")
    (ingress_id,) = [k for k in kube if k.startswith("Ingress")]
    (services_id,) = [k for k in kube if k.startswith("LlmServices")]
    assert services_id in depends("Ingress") and ingress_id in depends("LlmNvidiaWorkload")


def test_each_llm_role_reads_only_the_language_models_prefixes(serving):
    roles = serving.template.find_resources("AWS::IAM::Role")
    llm_roles = {k: r for k, r in roles.items() if k.startswith("Llm")}
    weights, artifacts = weights_prefix(serving.llm.model_id), lcj.artifact_prefix(serving.llm)
    expected_reads = {
        "LlmNeuronIdentity": {weights, artifacts},
        "LlmNvidiaIdentity": {weights},
        "LlmNeuronCompileIdentity": {weights, artifacts},
    }
    for role_id, prefixes in expected_reads.items():
        ((_, role),) = [(k, r) for k, r in llm_roles.items() if k.startswith(role_id)]
        statements = role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        read = next(s for s in statements if s["Action"] == "s3:GetObject")
        resources = read["Resource"] if isinstance(read["Resource"], list) else [read["Resource"]]
        assert {r["Fn::Join"][1][1].strip("/").removesuffix("*") for r in resources} == prefixes, role_id
        writes = {"s3:PutObject"} if "Compile" in role_id else set()
        metrics = set() if "Compile" in role_id else {"cloudwatch:PutMetricData"}
        assert actions == {"s3:GetObject", "s3:ListBucket"} | writes | metrics, role_id


def test_the_stack_says_where_the_openai_api_is(serving):
    outputs = serving.template.find_outputs("LlmBaseUrl")
    ((_, output),) = outputs.items()
    assert json.dumps(output["Value"]).endswith('/v1"]]}') or output["Value"].endswith("/v1")
    assert serving.llm.served_model_name in output["Description"]


def test_with_llm_serving_off_no_template_holds_any_of_it(variant_synth):
    assert variant_synth.config.llm is None
    for name, template in variant_synth.raw_templates.items():
        assert not [k for k in template["Resources"] if k.startswith("Llm")], name
        text = json.dumps(template)
        for mark in ("llm-gateway", "llm-neuron", "llm-gpu", "llm-weighted", "llmGateway", "TimeToFirstToken"):
            assert mark not in text, (name, mark)
