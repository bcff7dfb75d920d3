"""Images: ECR, the CodeBuild projects and the build-on-deploy custom resource."""

from __future__ import annotations

import fnmatch
import json
import re

import pytest

from cdk import versions
from cdk.constructs.image_builds import ROUTING_CONTROLLER_BUILD, ROUTING_CONTROLLER_KIND, repository_name
from cdk.llm.images import LLM_GATEWAY_IMAGE
from tests.cdk.conftest import as_list, resources_of
from tests.cdk.manifests import manifests

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
            # A rolled-back first deploy must not leave the fixed-name repository behind.
            "EmptyOnDelete": True,
        },
    )
    template.has_resource("AWS::ECR::Repository", {"DeletionPolicy": "Delete"})


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
        # Resolved for the deploy's region (and its DLC registry account: 763104351884 in the example's).
        assert variables["BASE_IMAGE"] == versions.BASE_IMAGES[name].replace("{region}", platform_synth.config.region)
        assert variables["IMAGE_TAG"].startswith(f"{name}-")
        # The Dockerfile has no default for it: the pin reaches the Neuron build only from versions.py.
        assert variables.get("OPTIMUM_NEURON_VERSION") == (
            versions.OPTIMUM_NEURON_VERSION if name == "neuron" else None
        )
    assert "pytorch-inference-neuronx" in _region_free(projects["neuron"][1]["BASE_IMAGE"])


def _first_stage(template):
    """The Custom::ImageBuilds resource that starts the builds (the later stages only wait)."""
    (resource,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "Custom::ImageBuilds" and r["Properties"]["WaitStage"] == 1
    ]
    return resource


def test_custom_resource_starts_and_waits_for_every_build(platform_synth):
    template = platform_synth.raw_templates[IMAGES]
    resource = _first_stage(template)
    builds = resource["Properties"]["Builds"]
    small = [ROUTING_CONTROLLER_BUILD, *([LLM_GATEWAY_IMAGE.build] if platform_synth.config.llm is not None else [])]
    assert [b["Accelerator"] for b in builds] == ["neuron", "nvidia", *small]
    projects = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::CodeBuild::Project"}
    assert {b["Project"]["Ref"] for b in builds} == projects
    handlers = {
        r["Properties"]["Handler"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "codebuild_runner" in str(r["Properties"].get("Handler"))
    }
    assert handlers == {"codebuild_runner.on_event", "codebuild_runner.is_complete"}
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
    # app/ (the service and its image locks), the shared runtime common/ (whole, as the Dockerfile copies it) and
    # the image's own buildspec: not the repository's requirement files, which the tests and the CDK app read, nor
    # the other images' packages or buildspecs.
    assert {p.name for p in copied.iterdir()} == {"app", "common", "buildspecs"}
    assert [p.name for p in (copied / "buildspecs").iterdir()] == ["image.yml"]
    assert (copied / "app" / "requirements").is_dir() and (copied / "app" / "Dockerfile").is_file()
    shared = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "common").rglob("*.py")}
    assert {str(p.relative_to(copied)) for p in (copied / "common").rglob("*.py")} == shared
    assert not list(copied.rglob("__pycache__"))


def test_image_tag_changes_with_every_input_and_only_then():
    from cdk.constructs.image_builds import build_args, image_tag

    base = {"source_hash": "a" * 64, "base_image": versions.NVIDIA_BASE_IMAGE, "args": build_args("nvidia")}
    tag = image_tag("nvidia", **base)
    assert tag == image_tag("nvidia", **base) and tag.startswith("nvidia-")
    assert image_tag("nvidia", **{**base, "source_hash": "b" * 64}) != tag
    assert image_tag("nvidia", **{**base, "base_image": base["base_image"].replace("2.13.0", "2.14.0")}) != tag
    neuron = {**base, "base_image": versions.NEURON_BASE_IMAGE, "args": build_args("neuron")}
    bumped = {**neuron["args"], "OPTIMUM_NEURON_VERSION": "0.4.6"}
    assert image_tag("neuron", **{**neuron, "args": bumped}) != image_tag("neuron", **neuron)


def _synth_tags(synth):
    """accelerator -> (IMAGE_TAG, the source asset hash) of one synth."""
    resource = _first_stage(synth.raw_templates[IMAGES])
    return {name: (v["IMAGE_TAG"], resource["Properties"]["SourceHash"]) for name, (_, v) in _projects(synth).items()}


def test_synthesized_tags_hash_source_base_image_and_build_args(platform_synth, variant_synth):
    from cdk.constructs.image_builds import build_args, image_tag

    for synth in (platform_synth, variant_synth):
        for name, (tag, source_hash) in _synth_tags(synth).items():
            base_image = synth.config.capacity_for(name).base_image
            assert tag == image_tag(name, source_hash=source_hash, base_image=base_image, args=build_args(name))
    # Same sources, another base image (the variant's nvidiaBaseImage): another image.
    default_tag, default_source = _synth_tags(platform_synth)["nvidia"]
    variant_tag, variant_source = _synth_tags(variant_synth)["nvidia"]
    assert variant_source == default_source
    assert variant_synth.config.capacity_for("nvidia").base_image != versions.NVIDIA_BASE_IMAGE
    assert variant_tag != default_tag


def _deployed_tags(synth) -> set[str]:
    """The tags of this app's repository that any synthesized manifest runs (containers, init containers)."""
    repository = repository_name(synth.config.cluster_name)
    found = re.compile(rf"/{re.escape(repository)}:([A-Za-z0-9._-]+)$")
    tags = set()

    def walk(node):
        if isinstance(node, dict):
            image = node.get("image")
            if isinstance(image, str) and (match := found.search(image)):
                tags.add(match.group(1))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for template in synth.raw_templates.values():
        walk(manifests(template))
    return tags


def _selects(selection: dict, tag: str) -> bool:
    """Whether an ECR lifecycle rule's selection matches an image with this one tag (all prefixes/patterns)."""
    if selection["tagStatus"] == "any":
        return True
    if selection["tagStatus"] == "untagged":
        return False
    return all(tag.startswith(p) for p in selection.get("tagPrefixList", [])) and all(
        fnmatch.fnmatchcase(tag, p) for p in selection.get("tagPatternList", [])
    )


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_lifecycle_never_counts_a_deployed_image_against_other_kinds(fixture, request):
    """The rule that governs a deployed image keeps the newest few of that image's own kind only, so
    builds of another kind (the service changes often, the routing controller rarely) never age it out."""
    synth = request.getfixturevalue(fixture)
    (repository,) = resources_of(synth.raw_templates[IMAGES], "AWS::ECR::Repository").values()
    rules = sorted(
        json.loads(repository["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])["rules"],
        key=lambda r: r["rulePriority"],
    )
    tags = _deployed_tags(synth)
    kinds = {tag.rsplit("-", 1)[0] for tag in tags}
    # Every image this synth builds is deployed somewhere, so each kind is checked.
    controller = {ROUTING_CONTROLLER_KIND} if synth.config.serving.runs_routing_controller else set()
    gateway = {LLM_GATEWAY_IMAGE.kind} if synth.config.llm is not None else set()
    assert kinds == {a.name for a in synth.handle.accelerators} | controller | gateway
    for tag in tags:
        kind = tag.rsplit("-", 1)[0]
        governing = next((r for r in rules if _selects(r["selection"], tag)), None)
        if governing is None:
            continue  # no rule selects it: never expired
        selection = governing["selection"]
        assert selection["tagStatus"] == "tagged" and selection.get("tagPrefixList") == [f"{kind}-"], (tag, governing)
        assert selection["countType"] == "imageCountMoreThan" and selection["countNumber"] >= 2, (tag, governing)


def test_the_build_starter_may_find_pushed_images_and_running_builds(platform_synth):
    """Without these the starter fails with AccessDenied before any build starts."""
    template = platform_synth.raw_templates[IMAGES]
    (starter,) = [
        logical_id
        for logical_id, r in resources_of(template, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler") == "codebuild_runner.on_event"
    ]
    role = template["Resources"][starter]["Properties"]["Role"]["Fn::GetAtt"][0]
    allowed: dict[str, list] = {}
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                for action in as_list(statement["Action"]):
                    allowed.setdefault(action, []).extend(as_list(statement["Resource"]))
    projects = [{"Fn::GetAtt": [k, "Arn"]} for k in resources_of(template, "AWS::CodeBuild::Project")]
    (repository,) = resources_of(template, "AWS::ECR::Repository")
    for action in ("codebuild:StartBuild", "codebuild:ListBuildsForProject", "codebuild:BatchGetBuilds"):
        assert sorted(map(json.dumps, allowed[action])) == sorted(map(json.dumps, projects)), action
    assert allowed["ecr:DescribeImages"] == [{"Fn::GetAtt": [repository, "Arn"]}]
