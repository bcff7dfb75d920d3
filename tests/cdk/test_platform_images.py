"""Images: ECR, the CodeBuild projects and the build-on-deploy custom resource."""

from __future__ import annotations

from aws_cdk.assertions import Match

from cdk import versions
from tests.cdk.conftest import resources_of

IMAGES = "SdOnEksImages"


def test_repository_scans_on_push_immutable_with_lifecycle(platform_synth):
    template = platform_synth.template(IMAGES)
    template.resource_count_is("AWS::ECR::Repository", 1)
    template.has_resource_properties(
        "AWS::ECR::Repository",
        {
            "RepositoryName": "sd-on-eks/stable-diffusion",
            "ImageScanningConfiguration": {"ScanOnPush": True},
            "ImageTagMutability": "IMMUTABLE",
            "EncryptionConfiguration": {"EncryptionType": "KMS"},
            "LifecyclePolicy": {"LifecyclePolicyText": Match.string_like_regexp('"countNumber":20')},
        },
    )


def _projects(synth):
    projects = {}
    for project in resources_of(synth.raw_templates[IMAGES], "AWS::CodeBuild::Project").values():
        env = project["Properties"]["Environment"]
        variables = {v["Name"]: v["Value"] for v in env["EnvironmentVariables"]}
        if "ACCELERATOR" in variables:  # the service images (the routing controller's has its own test)
            projects[variables["ACCELERATOR"]] = (project["Properties"], variables)
    return projects


def _region_free(value):
    """A base image with the stack's region (a Fn::Join) put back as {region}."""
    if isinstance(value, str):
        return value
    return "".join(p if isinstance(p, str) else "{region}" for p in value["Fn::Join"][1])


def test_one_privileged_project_per_accelerator_on_its_dlc_base(platform_synth):
    projects = _projects(platform_synth)
    assert set(projects) == {"neuron", "nvidia"}
    for name, (props, variables) in projects.items():
        assert props["Environment"]["PrivilegedMode"] is True
        assert props["Environment"]["Image"] == versions.CODEBUILD_IMAGE
        assert props["Source"]["Type"] == "S3"
        assert props["Source"]["BuildSpec"] == "buildspecs/image.yml"
        assert props["EncryptionKey"]
        assert _region_free(variables["BASE_IMAGE"]) == versions.BASE_IMAGES[name]
        assert variables["IMAGE_TAG"].startswith(f"{name}-")
        # The Dockerfile has no default for it: the pin reaches the Neuron build only from versions.py.
        assert variables.get("OPTIMUM_NEURON_VERSION") == (
            versions.OPTIMUM_NEURON_VERSION if name == "neuron" else None
        )
    assert "pytorch-inference-neuronx" in _region_free(projects["neuron"][1]["BASE_IMAGE"])


def test_custom_resource_starts_and_waits_for_every_build(platform_synth):
    template = platform_synth.raw_templates[IMAGES]
    (resource,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::ImageBuilds"]
    builds = resource["Properties"]["Builds"]
    assert [b["Accelerator"] for b in builds] == ["neuron", "nvidia", "routingController"]
    projects = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::CodeBuild::Project"}
    assert {b["Project"]["Ref"] for b in builds} == projects
    handlers = {
        r["Properties"]["Handler"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "image_build_trigger" in str(r["Properties"].get("Handler"))
    }
    assert handlers == {"image_build_trigger.on_event", "image_build_trigger.is_complete"}
    # The provider framework's waiter (is-complete) is a state machine.
    assert resources_of(template, "AWS::StepFunctions::StateMachine")


def test_handle_exposes_image_uris_tagged_with_the_source_hash(platform_synth):
    handle = platform_synth.handle
    assert [a.name for a in handle.accelerators] == ["neuron", "nvidia"]
    assert handle.kubernetes_version == "1.36"
    tags = {name: variables["IMAGE_TAG"] for name, (_, variables) in _projects(platform_synth).items()}
    for name, uri in handle.image_uris.items():
        assert uri.endswith(f"/sd-on-eks/stable-diffusion:{tags[name]}")


def test_source_asset_holds_only_what_the_dockerfile_needs(tmp_path):
    from aws_cdk import CopyOptions, FileSystem, IgnoreMode

    from cdk.constructs.image_builds import REPO_ROOT, SOURCE_EXCLUDES

    copied = tmp_path / "source"
    FileSystem.copy_directory(
        str(REPO_ROOT), str(copied), CopyOptions(exclude=SOURCE_EXCLUDES, ignore_mode=IgnoreMode.GLOB)
    )
    top = {p.name for p in copied.iterdir()}
    assert top <= {
        "app",
        "buildspecs",
        "requirements.txt",
        "requirements-local.txt",
        "requirements-cdk.txt",
        "requirements-dev.txt",
    }
    assert {"app", "buildspecs", "requirements.txt"} <= top
    assert not list(copied.rglob("__pycache__"))
