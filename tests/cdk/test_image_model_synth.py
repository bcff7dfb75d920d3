"""`-c imageModel=sdxl-base`, synthesized: the deploy stages SDXL, the compile Job compiles the preset's shapes on a
Neuron instance that fits, and the pods ask for what only the preset's instances have (one extra synth per session).
FLUX.1-schnell's objects are checked from the same pure functions without a synth (tests/cdk/test_image_presets.py).
"""

from __future__ import annotations

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA
from cdk.image.presets import INF2_8XLARGE, INF2_XLARGE, SDXL_BASE
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL
from tests.cdk.conftest import resources_of
from tests.cdk.manifests import manifests
from tests.support.k8s_schema import validate_all

SERVING = "SdOnEksServing"
CLUSTER = "SdOnEksCluster"
SDXL_SLUG = "stabilityai--stable-diffusion-xl-base-1.0"


def image_objects(sdxl_synth):
    return [m for m in manifests(sdxl_synth.raw_templates[SERVING]) if not m["metadata"]["name"].startswith("llm-")]


def named(objects, kind, name):
    (found,) = [m for m in objects if m["kind"] == kind and m["metadata"]["name"].startswith(name)]
    return found


def test_the_deploy_stages_sdxl(sdxl_synth):
    template = sdxl_synth.raw_templates[SERVING]
    (staging,) = [v for k, v in resources_of(template, "Custom::ModelStaging").items() if not k.startswith("Llm")]
    assert staging["Properties"]["PhysicalResourceId"] == f"weights-{SDXL_SLUG}"
    assert sdxl_synth.config.serving.model_id == SDXL_BASE.model_id.value


def test_the_compile_job_compiles_every_shape_on_a_node_fit_to_compile(sdxl_synth):
    objects = image_objects(sdxl_synth)
    job = named(objects, "Job", "sd-neuron-compile-")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert [a for a in container["args"] if a.startswith("--shape=")] == ["--shape=1024x1024"]
    assert "--tensor-parallel-size=1" in container["args"]
    assert not [a for a in container["args"] if a.startswith(("--height=", "--width="))]
    requests = container["resources"]["requests"]
    # Pinned to the inf2.8xlarge optimum-neuron compiles SDXL on (more than an inf2.xlarge has in any case).
    assert float(requests["cpu"]) > INF2_XLARGE.vcpu and requests[NEURON.resource_name] == 1
    assert pod["nodeSelector"] == {**NEURON.node_label, INSTANCE_TYPE_LABEL: INF2_8XLARGE.name}
    scratch = next(v for v in pod["volumes"] if v["name"] == "cache")
    assert scratch["emptyDir"]["sizeLimit"] == f"{SDXL_BASE.neuron_compile.scratch_gi}Gi"
    assert validate_all(objects, sdxl_synth.config.kubernetes_version) == []


def test_the_pods_serve_every_shape_on_instances_that_fit(sdxl_synth):
    objects = image_objects(sdxl_synth)
    neuron = named(objects, "Deployment", "sd-neuron")["spec"]["template"]["spec"]
    (serve,) = neuron["containers"]
    env = {e["name"]: e["value"] for e in serve["env"]}
    assert env["NEURON_SHAPES"] == "1024x1024"
    assert env["MODEL_ID"].endswith(f"/compiled/{SDXL_SLUG}/neuron-sdk-{versions.NEURON_SDK_VERSION}/b1-tp1/")
    # The inf2.xlarge's 16 GiB would need swap to load SDXL: the pod asks for more and is pinned to an inf2.8xlarge.
    assert serve["resources"]["requests"]["memory"] == f"{SDXL_BASE.neuron.memory_gi}Gi"
    assert SDXL_BASE.neuron.memory_gi * 1024 > INF2_XLARGE.memory_mib
    assert neuron["nodeSelector"][INSTANCE_TYPE_LABEL] == INF2_8XLARGE.name
    gpu = named(objects, "Deployment", "sd-gpu")["spec"]["template"]["spec"]
    (gpu_serve,) = gpu["containers"]
    assert gpu_serve["resources"]["requests"][NVIDIA.resource_name] == 1
    assert gpu["nodeSelector"][INSTANCE_TYPE_LABEL] == SDXL_BASE.nvidia.instance.name == "g6.xlarge"
    assert {e["name"]: e["value"] for e in gpu_serve["env"]}["MODEL_ID"].endswith(f"/models/{SDXL_SLUG}/")


def test_the_node_pools_offer_the_presets_families(sdxl_synth):
    pools = {m["metadata"]["name"]: m for m in manifests(sdxl_synth.raw_templates[CLUSTER]) if m["kind"] == "NodePool"}
    families = {
        name: next(
            r["values"]
            for r in pool["spec"]["template"]["spec"]["requirements"]
            if r["key"] == "karpenter.k8s.aws/instance-family"
        )
        for name, pool in pools.items()
    }
    assert families == {"neuron": ["inf2"], "nvidia": list(SDXL_BASE.nvidia_families)}
