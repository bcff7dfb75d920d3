"""The pins of cdk/versions.py that only the deploy's own account and region can confirm: Deep Learning
Container tags, the AL2023 AMIs' SSM parameters, EKS add-on builds, the CodeBuild image, and (with helm or
docker on PATH) the charts and ECR Public images."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Final

from botocore.exceptions import ClientError

from cdk import versions
from verify.context import Context
from verify.result import Check, Outcome, failed, passed, skipped, verdict

CLI_TIMEOUT_S = 120
# aws-cdk-lib installs the load balancer controller's chart from this repository (docs/first-deploy.md's row).
ALB_CONTROLLER_CHART_REPOSITORY: Final = "https://aws.github.io/eks-charts"


def ecr_image(ctx: Context, uri: str) -> Outcome:
    """The image `registry/repository:tag` exists in its ECR registry (the registry's account, the stack's region)."""
    registry, _, rest = uri.replace("{region}", ctx.region).partition("/")
    account = registry.split(".")[0]
    repository, _, tag = rest.rpartition(":")
    try:
        details = ctx.client("ecr").describe_images(
            registryId=account, repositoryName=repository, imageIds=[{"imageTag": tag}]
        )["imageDetails"]
    except ClientError as exc:
        # Some regions' Deep Learning Containers live in another account (docs/platform.md): say which was asked.
        return failed(f"{account}/{repository}:{tag}: {exc.response['Error']['Code']}")
    return verdict(bool(details), f"{repository}:{tag} {details[0]['imageDigest'][:19] if details else 'absent'}")


def nvidia_base_image(ctx: Context) -> Outcome:
    """NVIDIA_BASE_IMAGE is in the region's Deep Learning Containers registry."""
    return ecr_image(ctx, versions.NVIDIA_BASE_IMAGE)


def neuron_base_image(ctx: Context) -> Outcome:
    """NEURON_BASE_IMAGE is in the region's Deep Learning Containers registry."""
    return ecr_image(ctx, versions.NEURON_BASE_IMAGE)


def ami_parameter(variant: str) -> str:
    """The SSM parameter Karpenter resolves AL2023_AMI_ALIAS to for an accelerated variant (nvidia, neuron);
    the path is cdk/versions.py's (Karpenter's al2023.go resolvePath)."""
    release = versions.AL2023_AMI_ALIAS.partition("@")[2]
    k8s = versions.KUBERNETES_VERSION
    return (
        f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/x86_64/{variant}/"
        f"amazon-eks-node-al2023-x86_64-{variant}-{k8s}-{release}/image_id"
    )


def al2023_amis(ctx: Context) -> Outcome:
    """Both accelerated AMIs of the pinned release exist for the pinned Kubernetes version."""
    names = [ami_parameter(v) for v in ("nvidia", "neuron")]
    answer = ctx.client("ssm").get_parameters(Names=names)
    found = {p["Name"]: p["Value"] for p in answer.get("Parameters", [])}
    missing = [n.split("/")[-2] for n in names if n not in found]
    if missing:
        return failed(f"no SSM parameter for {', '.join(missing)}")
    return passed(", ".join(found[n] for n in names))


def addon_version(ctx: Context, addon: str, version: str) -> Outcome:
    """The EKS add-on build `version` exists for the pinned Kubernetes version."""
    pages = (
        ctx.client("eks")
        .get_paginator("describe_addon_versions")
        .paginate(kubernetesVersion=versions.KUBERNETES_VERSION, addonName=addon)
    )
    builds = {v["addonVersion"] for page in pages for a in page["addons"] for v in a.get("addonVersions", [])}
    k8s = versions.KUBERNETES_VERSION
    return verdict(version in builds, f"{addon} {version} {'listed' if version in builds else 'not listed'} for {k8s}")


def pod_identity_agent_addon(ctx: Context) -> Outcome:
    """POD_IDENTITY_AGENT_ADDON_VERSION exists."""
    return addon_version(ctx, "eks-pod-identity-agent", versions.POD_IDENTITY_AGENT_ADDON_VERSION)


def cloudwatch_observability_addon(ctx: Context) -> Outcome:
    """CLOUDWATCH_OBSERVABILITY_ADDON_VERSION exists."""
    return addon_version(ctx, "amazon-cloudwatch-observability", versions.CLOUDWATCH_OBSERVABILITY_ADDON_VERSION)


def codebuild_image(ctx: Context) -> Outcome:
    """CODEBUILD_IMAGE is still a curated CodeBuild image."""
    platforms = ctx.client("codebuild").list_curated_environment_images()["platforms"]
    names = {i["name"] for p in platforms for lang in p.get("languages", []) for i in lang.get("images", [])}
    found = versions.CODEBUILD_IMAGE in names
    return verdict(found, f"{versions.CODEBUILD_IMAGE} {'curated' if found else 'not curated'}")


def most_devices(ctx: Context, family: str) -> int | None:
    """The most GPUs or Neuron devices any size of an instance family has in the region (None: no such family)."""
    pages = (
        ctx.client("ec2")
        .get_paginator("describe_instance_types")
        .paginate(Filters=[{"Name": "instance-type", "Values": [f"{family}.*"]}])
    )
    counts = [
        sum(d.get("Count", 0) for d in (t.get("GpuInfo") or {}).get("Gpus", []))
        + sum(d.get("Count", 0) for d in (t.get("NeuronInfo") or {}).get("NeuronDevices", []))
        for page in pages
        for t in page["InstanceTypes"]
    ]
    return max(counts) if counts else None


def max_devices_per_family(ctx: Context) -> Outcome:
    """The largest instance of each family has as many chips or GPUs as MAX_DEVICES_PER_FAMILY says (the LLM
    tensor parallel check at synth relies on it)."""
    from cdk.config.llm import MAX_DEVICES_PER_FAMILY  # its package imports aws-cdk-lib: only when this runs

    wrong: list[str] = []
    absent: list[str] = []
    for family, pinned in MAX_DEVICES_PER_FAMILY.items():
        found = most_devices(ctx, family)
        if found is None:
            absent.append(family)
        elif found != pinned:
            wrong.append(f"{family}: {found}, not {pinned}")
    if wrong:
        return failed("; ".join(wrong))
    checked = len(MAX_DEVICES_PER_FAMILY) - len(absent)
    return passed(f"{checked} families match" + (f"; not in {ctx.region}: {', '.join(absent)}" if absent else ""))


def cli(ctx: Context, tool: str, args: Sequence[str], what: str) -> Outcome:
    """Run an optional CLI (helm, docker): PASS when it exits 0, SKIP when it is not installed."""
    path = ctx.which(tool)
    if path is None:
        return skipped(f"{tool} not on PATH: run `{tool} {' '.join(args)}` by hand")
    try:
        result = subprocess.run([path, *args], capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return failed(f"{tool} {args[0]} did not answer in {CLI_TIMEOUT_S} s")
    lines = result.stderr.strip().splitlines()
    return verdict(result.returncode == 0, what if result.returncode == 0 else (lines[-1] if lines else what))


def chart(ctx: Context, reference: str, version: str, repository: str | None = None) -> Outcome:
    """`helm show chart` finds the chart at its pinned version (an OCI reference, or a name in a repository)."""
    args = ["show", "chart", reference, "--version", version, *(["--repo", repository] if repository else [])]
    return cli(ctx, "helm", args, f"{reference.rsplit('/', 1)[-1]} {version} published")


def image_manifest(ctx: Context, image: str) -> Outcome:
    """`docker manifest inspect` finds the image's manifest."""
    return cli(ctx, "docker", ["manifest", "inspect", image], f"{image.rsplit('/', 1)[-1]} has a manifest")


CHECKS: Final = (
    Check("pin-nvidia-base-image", nvidia_base_image),
    Check("pin-neuron-base-image", neuron_base_image),
    Check("pin-al2023-amis", al2023_amis),
    Check("pin-pod-identity-agent-addon", pod_identity_agent_addon),
    Check("pin-cloudwatch-observability-addon", cloudwatch_observability_addon),
    Check("pin-codebuild-image", codebuild_image),
    Check("pin-max-devices-per-family", max_devices_per_family),
    Check(
        "pin-karpenter-chart",
        lambda ctx: chart(ctx, versions.KARPENTER_CHART_REPOSITORY, versions.KARPENTER_CHART_VERSION),
    ),
    Check("pin-neuron-chart", lambda ctx: chart(ctx, versions.NEURON_CHART_REPOSITORY, versions.NEURON_CHART_VERSION)),
    Check(
        "pin-keda-chart",
        lambda ctx: chart(ctx, "keda", versions.KEDA_CHART_VERSION, versions.KEDA_CHART_REPOSITORY),
    ),
    Check(
        "pin-nvidia-device-plugin-chart",
        lambda ctx: chart(
            ctx,
            "nvidia-device-plugin",
            versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
            versions.NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY,
        ),
    ),
    Check(
        "pin-alb-controller-chart",
        lambda ctx: chart(
            ctx,
            "aws-load-balancer-controller",
            versions.ALB_CONTROLLER_VERSION.removeprefix("v"),
            ALB_CONTROLLER_CHART_REPOSITORY,
        ),
    ),
    Check("pin-routing-controller-base-image", lambda ctx: image_manifest(ctx, versions.ROUTING_CONTROLLER_BASE_IMAGE)),
    Check("pin-llm-gateway-base-image", lambda ctx: image_manifest(ctx, versions.LLM_GATEWAY_BASE_IMAGE)),
    Check("pin-vllm-neuron-image", lambda ctx: image_manifest(ctx, versions.VLLM_NEURON_IMAGE)),
    Check("pin-vllm-nvidia-image", lambda ctx: image_manifest(ctx, versions.VLLM_NVIDIA_IMAGE)),
)
