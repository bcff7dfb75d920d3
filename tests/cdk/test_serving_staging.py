"""No manual step: the deploy stages the weights, then compiles on a node fit to compile, re-runnable by one command."""

from __future__ import annotations

import json
import re

import yaml

from cdk import versions
from cdk.image import neuron_compile_job as njob
from cdk.serving import model_staging
from tests.cdk.conftest import DEFAULT_OVERRIDES, resources_of
from tests.cdk.manifests import manifests
from tests.support.k8s_schema import validate_all

SERVING = "SdOnEksServing"
CLUSTER = "SdOnEksCluster"
# inf2.xlarge: 4 vCPU, 16 GiB; inf2.8xlarge: 32 vCPU, 128 GiB (meta-pytorch/torchx PR #977,
# torchx/specs/named_resources_aws.py, aws_inf2_xlarge / aws_inf2_8xlarge).
INF2_XLARGE = (4, 16)
INF2_8XLARGE = (32, 128)


def image_side(resources):
    """The image model's resources: with llmEnabled (the default synth) LLM serving's sit under `Llm...` ids
    (tests/cdk/test_llm_serving.py checks those)."""
    return {k: v for k, v in resources.items() if not k.startswith("Llm")}


def the(resources):
    (value,) = image_side(resources).values()
    return value


def by_kind(objects, kind):
    return {
        m["metadata"]["name"]: m for m in objects if m["kind"] == kind and not m["metadata"]["name"].startswith("llm-")
    }


def test_the_deploy_runs_the_projects_own_staging_program_in_codebuild(platform_synth):
    template = platform_synth.raw_templates[SERVING]
    staging = the(resources_of(template, "Custom::ModelStaging"))
    (build,) = staging["Properties"]["Builds"]
    projects = resources_of(template, "AWS::CodeBuild::Project")
    project = projects[build["Project"]["Ref"]]["Properties"]
    spec = yaml.safe_load(project["Source"]["BuildSpec"])
    assert spec["phases"]["install"]["runtime-versions"] == {"python": versions.STAGE_PYTHON_VERSION}
    install = " ".join(spec["phases"]["install"]["commands"])
    assert "--no-deps" in install and "-r requirements-stage.txt" in install
    (run,) = spec["phases"]["build"]["commands"]
    assert "-m common.model_store.stage" in run and '--model-id "$MODEL_ID"' in run
    assert '--revision "$MODEL_REVISION"' in run
    env = {v["Name"]: v for v in project["Environment"]["EnvironmentVariables"]}
    assert env["MODEL_ID"]["Value"] == platform_synth.config.serving.model_id
    assert env["MODEL_REVISION"]["Value"] == platform_synth.config.serving.model_revision
    assert staging["Properties"]["ModelRevision"] == platform_synth.config.serving.model_revision
    assert not project["Environment"]["PrivilegedMode"]
    assert staging["Properties"]["PhysicalResourceId"] == "weights-sd2-community--stable-diffusion-2-1-base"


def test_the_hub_token_is_read_from_secrets_manager_at_build_time_and_never_written_down(platform_synth):
    template = platform_synth.raw_templates[SERVING]
    secret = DEFAULT_OVERRIDES["servingHubTokenSecretName"]
    project = the(resources_of(template, "AWS::CodeBuild::Project"))["Properties"]
    env = {v["Name"]: v for v in project["Environment"]["EnvironmentVariables"]}
    assert env[model_staging.HUB_AUTH_ENV_NAME] == {
        "Name": model_staging.HUB_AUTH_ENV_NAME,
        "Type": "SECRETS_MANAGER",
        "Value": secret,
    }
    grants = [
        s
        for p in resources_of(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager" in json.dumps(s)
    ]
    # One grant per staging build (the image model's, and the language model's with llmEnabled), each the same.
    stagings = resources_of(template, "Custom::ModelStaging")
    assert grants == [{"Action": "secretsmanager:GetSecretValue", "Effect": "Allow", "Resource": secret + "*"}] * len(
        stagings
    )
    # Nothing that looks like a Hub token anywhere in any template.
    for name, body in platform_synth.raw_templates.items():
        assert not re.search(r"hf_[A-Za-z0-9]{20,}", json.dumps(body)), name


def test_staging_may_touch_only_the_models_weights_prefix(platform_synth):
    template = platform_synth.raw_templates[SERVING]
    prefix = "models/sd2-community--stable-diffusion-2-1-base/"
    policies = resources_of(template, "AWS::IAM::Policy")
    statements = [
        s
        for k, p in policies.items()
        if k.startswith("WeightsStagingProject")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_sid = {s["Sid"]: s for s in statements if s.get("Sid", "").endswith("Prefix")}
    assert by_sid["StageWeightsPrefix"]["Resource"]["Fn::Join"][1][1] == f"/{prefix}*"
    assert sorted(by_sid["StageWeightsPrefix"]["Action"]) == ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
    assert by_sid["ListWeightsPrefix"]["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}


def test_compile_and_pods_are_applied_only_after_the_weights_are_staged(platform_synth):
    template = platform_synth.raw_templates[SERVING]
    (staging_id,) = image_side(resources_of(template, "Custom::ModelStaging"))
    kube = resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource")
    for logical_id in ("NeuronCompileJob", "NeuronWorkload", "NvidiaWorkload"):
        (resource,) = [r for k, r in kube.items() if k.startswith(logical_id)]
        assert staging_id in resource["DependsOn"], logical_id


def test_the_staging_wait_ends_within_cloudformations_hour_and_after_the_builds_own_limit(platform_synth):
    template = platform_synth.raw_templates[SERVING]
    project = the(resources_of(template, "AWS::CodeBuild::Project"))["Properties"]
    machines = image_side(resources_of(template, "AWS::StepFunctions::StateMachine"))
    (machine,) = [m for k, m in machines.items() if "Staging" in k]
    definition = "".join(p for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1] if isinstance(p, str))
    retry = re.search(r'"IntervalSeconds":(\d+),"MaxAttempts":(\d+),"BackoffRate":1', definition)
    wait_s = int(retry.group(1)) * int(retry.group(2))
    assert project["TimeoutInMinutes"] * 60 < wait_s <= 3600


def test_the_compile_pod_only_fits_a_node_big_enough_to_compile(serving):
    job = the(by_kind(serving.manifests, "Job"))
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    (container,) = pod["spec"]["containers"]
    requests = container["resources"]["requests"]
    cpu, memory_gi = float(requests["cpu"]), int(requests["memory"].removesuffix("Gi"))
    assert cpu > INF2_XLARGE[0] or memory_gi > INF2_XLARGE[1]  # an inf2.xlarge cannot take it
    assert cpu < INF2_8XLARGE[0] and memory_gi < INF2_8XLARGE[1] * 0.9  # an inf2.8xlarge can (minus overhead)
    assert container["command"][-3:] == ["-m", "app.model_store.neuron_compile", "compile"]


def test_the_neuron_node_pool_offers_the_compile_node(platform_synth, serving):
    pools = by_kind(manifests(platform_synth.raw_templates[CLUSTER]), "NodePool")
    pool = pools["neuron"]
    requirements = {r["key"]: r for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert "inf2" in requirements["karpenter.k8s.aws/instance-family"]["values"]
    # Nothing narrows the sizes below an inf2.8xlarge.
    narrowing = {
        "karpenter.k8s.aws/instance-size",
        "karpenter.k8s.aws/instance-cpu",
        "node.kubernetes.io/instance-type",
    }
    assert not narrowing & set(requirements)
    assert int(pool["spec"]["limits"]["cpu"]) >= INF2_8XLARGE[0]
    job_pod = the(by_kind(serving.manifests, "Job"))["spec"]["template"]["spec"]
    # The pool's label, and in it the one type the compile is pinned to (neuronCompileInstanceType).
    assert job_pod["nodeSelector"] == {
        **pool["spec"]["template"]["metadata"]["labels"],
        "node.kubernetes.io/instance-type": "inf2.8xlarge",
    }


def test_a_failed_compile_is_rerun_from_a_suspended_cronjob_with_the_same_spec(serving, platform_synth):
    job = the(by_kind(serving.manifests, "Job"))
    cron = by_kind(serving.manifests, "CronJob")[njob.RERUN_CRONJOB]
    assert cron["spec"]["suspend"] is True
    assert cron["spec"]["jobTemplate"]["spec"] == job["spec"]
    assert validate_all([job, cron], serving.platform.kubernetes_version) == []
    outputs = platform_synth.raw_templates[SERVING]["Outputs"]
    command = outputs["NeuronCompileRerunCommand"]["Value"]
    # `make verify` checks each size's folder and marker (verify/serving.py): the sizes the compile was given.
    assert outputs["NeuronCompiledSizes"]["Value"] == ",".join(s.key for s in njob.compile_sizes(serving.config))
    assert f"create job --from=cronjob/{njob.RERUN_CRONJOB} " in command
    assert f"-n {serving.config.namespace} " in command


def test_brought_weights_are_not_staged_and_are_read_where_they_are(variant_synth, capacity_serving):
    template = variant_synth.raw_templates[SERVING]
    assert not resources_of(template, "Custom::ModelStaging")
    assert not resources_of(template, "AWS::CodeBuild::Project")
    pod = by_kind(capacity_serving.manifests, "Deployment")["sd-gpu"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["MODEL_ID"] == "s3://example-weights/sd21/"
    roles = json.dumps(resources_of(template, "AWS::IAM::Role"))
    assert 'arn:", {"Ref": "AWS::Partition"}, ":s3:::example-weights/sd21/*' in roles


def test_the_staging_source_holds_only_the_staging_program(tmp_path):
    from aws_cdk import CopyOptions, FileSystem, IgnoreMode

    copied = tmp_path / "source"
    FileSystem.copy_directory(
        str(model_staging.REPO_ROOT),
        str(copied),
        CopyOptions(exclude=model_staging.SOURCE_EXCLUDES, ignore_mode=IgnoreMode.GLOB),
    )
    assert {p.name for p in copied.iterdir()} == {"common", "requirements-stage.txt"}
    assert {p.name for p in (copied / "common").iterdir()} == {"__init__.py", "model_store"}
    assert (copied / "common" / "model_store" / "stage.py").is_file()
    assert not list(copied.rglob("__pycache__"))


def test_the_compile_job_writes_its_large_files_to_the_model_sized_scratch_volume(serving):
    """optimum-neuron's export (TMPDIR), the compiler cache and the work folder all go to the scratch volume,
    whose size comes from neuronCompileScratchGi; /tmp stays small (HOME only)."""
    (job,) = by_kind(serving.manifests, "Job").values()
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    sizes = {v["name"]: v["emptyDir"]["sizeLimit"] for v in pod["volumes"]}
    scratch = mounts[njob.SCRATCH_DIR]
    assert sizes[scratch] == f"{serving.config.compile_settings.scratch_gi}Gi"
    work_dir = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--work-dir="))
    for path in (env["TMPDIR"], env["NEURON_COMPILE_CACHE_URL"], work_dir):
        assert path == njob.SCRATCH_DIR or path.startswith(njob.SCRATCH_DIR + "/"), path
