"""The pin checks: each asks AWS (botocore-stubbed: the requests are checked against the service models) or an
optional CLI about cdk/versions.py's value, passes when it is there, fails when it is not, and skips a CLI that
is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdk import versions
from tests.verify.conftest import run, stubbed
from verify import pins
from verify.result import Status


@pytest.mark.parametrize(
    ("check", "uri"),
    [(pins.nvidia_base_image, versions.NVIDIA_BASE_IMAGE), (pins.neuron_base_image, versions.NEURON_BASE_IMAGE)],
)
def test_a_dlc_tag_is_looked_up_in_the_regions_registry(make_context, check, uri):
    repository, _, tag = uri.partition("/")[2].rpartition(":")
    ecr, stub = stubbed("ecr")
    params = {
        "registryId": versions.DLC_REGISTRY_ACCOUNT,
        "repositoryName": repository,
        "imageIds": [{"imageTag": tag}],
    }
    stub.add_response("describe_images", {"imageDetails": [{"imageDigest": "sha256:" + "1" * 64}]}, params)
    stub.add_client_error("describe_images", "ImageNotFoundException", expected_params=params)
    ctx = make_context(clients={"ecr": ecr})

    found = run(check, ctx)
    assert found.status == Status.PASS and tag in found.evidence and "sha256:111" in found.evidence
    missing = run(check, ctx)
    assert missing.status == Status.FAIL and "ImageNotFoundException" in missing.evidence
    stub.assert_no_pending_responses()


def test_the_ami_parameters_are_the_ones_karpenter_resolves_the_alias_to():
    release = versions.AL2023_AMI_ALIAS.split("@")[1]
    name = pins.ami_parameter("neuron")
    assert name.startswith(f"/aws/service/eks/optimized-ami/{versions.KUBERNETES_VERSION}/amazon-linux-2023/")
    assert name.endswith(
        f"/neuron/amazon-eks-node-al2023-x86_64-neuron-{versions.KUBERNETES_VERSION}-{release}/image_id"
    )


def test_both_accelerated_amis_must_exist(make_context):
    names = [pins.ami_parameter("nvidia"), pins.ami_parameter("neuron")]
    ssm, stub = stubbed("ssm")
    both = [{"Name": n, "Type": "String", "Value": f"ami-{i}"} for i, n in enumerate(names)]
    stub.add_response("get_parameters", {"Parameters": both}, {"Names": names})
    stub.add_response("get_parameters", {"Parameters": both[:1], "InvalidParameters": names[1:]}, {"Names": names})
    ctx = make_context(clients={"ssm": ssm})

    assert run(pins.al2023_amis, ctx).evidence == "ami-0, ami-1"
    one = run(pins.al2023_amis, ctx)
    assert one.status == Status.FAIL and "neuron" in one.evidence


@pytest.mark.parametrize(
    ("check", "addon", "version"),
    [
        (pins.pod_identity_agent_addon, "eks-pod-identity-agent", versions.POD_IDENTITY_AGENT_ADDON_VERSION),
        (
            pins.cloudwatch_observability_addon,
            "amazon-cloudwatch-observability",
            versions.CLOUDWATCH_OBSERVABILITY_ADDON_VERSION,
        ),
    ],
)
def test_an_addon_build_must_be_listed_for_the_pinned_kubernetes(make_context, check, addon, version):
    eks, stub = stubbed("eks")
    params = {"kubernetesVersion": versions.KUBERNETES_VERSION, "addonName": addon}
    listed = {"addons": [{"addonName": addon, "addonVersions": [{"addonVersion": version}, {"addonVersion": "v0"}]}]}
    stub.add_response("describe_addon_versions", listed, params)
    stub.add_response("describe_addon_versions", {"addons": [{"addonName": addon, "addonVersions": []}]}, params)
    ctx = make_context(clients={"eks": eks})

    assert run(check, ctx).status == Status.PASS
    gone = run(check, ctx)
    assert gone.status == Status.FAIL and f"{version} not listed" in gone.evidence


def test_the_codebuild_image_must_still_be_curated(make_context):
    codebuild, stub = stubbed("codebuild")

    def curated(*names: str) -> dict:
        return {"platforms": [{"platform": "AMAZON_LINUX_2", "languages": [{"images": [{"name": n} for n in names]}]}]}

    stub.add_response("list_curated_environment_images", curated("aws/codebuild/x", versions.CODEBUILD_IMAGE), {})
    stub.add_response("list_curated_environment_images", curated("aws/codebuild/x"), {})
    ctx = make_context(clients={"codebuild": codebuild})

    assert run(pins.codebuild_image, ctx).status == Status.PASS
    assert run(pins.codebuild_image, ctx).status == Status.FAIL


def fake_cli(tmp_path: Path, name: str, exit_code: int) -> str:
    """A CLI that records its arguments and exits as told (helm's and docker's last error line on failure)."""
    tmp_path.mkdir()
    script = tmp_path / name
    record = tmp_path / f"{name}.args"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> "{record}"\n'
        + (f'echo "Error: {name} could not find it" >&2\nexit {exit_code}\n' if exit_code else "exit 0\n")
    )
    script.chmod(0o755)
    return str(script)


# What each CLI check asks its tool about.
CLI_PINS = {
    "pin-karpenter-chart": versions.KARPENTER_CHART_VERSION,
    "pin-neuron-chart": versions.NEURON_CHART_VERSION,
    "pin-keda-chart": versions.KEDA_CHART_VERSION,
    "pin-nvidia-device-plugin-chart": versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
    "pin-alb-controller-chart": versions.ALB_CONTROLLER_VERSION.removeprefix("v"),
    "pin-routing-controller-base-image": versions.ROUTING_CONTROLLER_BASE_IMAGE,
    "pin-llm-gateway-base-image": versions.LLM_GATEWAY_BASE_IMAGE,
    "pin-vllm-neuron-image": versions.VLLM_NEURON_IMAGE,
    "pin-vllm-nvidia-image": versions.VLLM_NVIDIA_IMAGE,
}


@pytest.mark.parametrize("name", sorted(CLI_PINS))
def test_charts_and_public_images_go_through_their_cli_or_skip(make_context, tmp_path, name):
    check = next(c for c in pins.CHECKS if c.name == name)
    tool = "helm" if name.endswith("-chart") else "docker"

    absent = run(check, make_context())
    assert absent.status == Status.SKIP and f"{tool} not on PATH" in absent.evidence
    ok = run(check, make_context(tools={tool: fake_cli(tmp_path / "ok", tool, 0)}))
    assert ok.status == Status.PASS
    broken = run(check, make_context(tools={tool: fake_cli(tmp_path / "no", tool, 1)}))
    assert broken.status == Status.FAIL and "could not find it" in broken.evidence
    assert CLI_PINS[name] in (tmp_path / "ok" / f"{tool}.args").read_text().split()


def instance_types(gpus: int = 0, neuron: int = 0) -> dict:
    info: dict = {"InstanceType": "x.48xlarge"}
    if gpus:
        info["GpuInfo"] = {"Gpus": [{"Name": "A10G", "Count": gpus}]}
    if neuron:
        info["NeuronInfo"] = {"NeuronDevices": [{"Name": "Inferentia2", "Count": neuron}]}
    return {"InstanceTypes": [{"InstanceType": "x.xlarge"}, info]}


def test_the_largest_instance_of_each_family_has_the_pinned_device_count(make_context):
    from cdk.config.llm import MAX_DEVICES_PER_FAMILY

    def stub_all(override: dict[str, int]) -> object:
        ec2, stub = stubbed("ec2")
        for family, count in MAX_DEVICES_PER_FAMILY.items():
            count = override.get(family, count)
            answer = instance_types(neuron=count) if family.startswith(("inf", "trn")) else instance_types(gpus=count)
            if family == "gr6":  # a family this region lacks
                answer = {"InstanceTypes": []}
            stub.add_response(
                "describe_instance_types", answer, {"Filters": [{"Name": "instance-type", "Values": [f"{family}.*"]}]}
            )
        return ec2

    ok = run(pins.max_devices_per_family, make_context(clients={"ec2": stub_all({})}))
    assert ok.status == Status.PASS and ok.evidence.endswith("not in us-east-1: gr6")
    fewer = run(pins.max_devices_per_family, make_context(clients={"ec2": stub_all({"inf2": 6})}))
    assert fewer.status == Status.FAIL and fewer.evidence == "inf2: 6, not 12"
