"""Every version the platform pins, in one place, so that a bump is a one-line change.

Nothing here floats: an unpinned chart, add-on or AMI changes what a redeploy creates without a
code change (an unpinned accelerated AMI has broken stacks like this one before).
"""

from __future__ import annotations

from typing import Final

# Kubernetes: the newest minor that both aws-cdk-lib (KubernetesVersion.V1_36) and Karpenter 1.14 support.
KUBERNETES_VERSION: Final = "1.36"
SUPPORTED_KUBERNETES_VERSIONS: Final = ("1.34", "1.35", "1.36")

# The kubectl/helm Lambda layer is aws-cdk.lambda-layer-kubectl-v36 (requirements-cdk.txt,
# cdk/constructs/cluster.py): bump it with KUBERNETES_VERSION.

# Karpenter (OCI chart; ships the karpenter.sh/v1 and karpenter.k8s.aws/v1 CRDs in crds/).
KARPENTER_CHART_REPOSITORY: Final = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_CHART_VERSION: Final = "1.14.1"

# AL2023 accelerated AMIs for Karpenter, pinned by alias version (EC2NodeClass amiSelectorTerms).
AL2023_AMI_ALIAS: Final = "al2023@v20260828"

# AWS Load Balancer Controller: the newest version aws-cdk-lib ships an IAM policy for
# (AlbControllerVersion.V3_2_2); CDK pins its chart version with it.
ALB_CONTROLLER_VERSION: Final = "v3.2.2"

# KEDA.
KEDA_CHART_REPOSITORY: Final = "https://kedacore.github.io/charts"
KEDA_CHART_VERSION: Final = "2.20.1"

# NVIDIA device plugin.
NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY: Final = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART_VERSION: Final = "0.20.0"

# Neuron Helm chart: device plugin + scheduler extension (+ node problem detector, kept off).
# Pods that need the extension set schedulerName: my-scheduler (the chart's custom scheduler).
NEURON_CHART_REPOSITORY: Final = "oci://public.ecr.aws/neuron/neuron-helm-chart"
NEURON_CHART_VERSION: Final = "1.1.2"
NEURON_SCHEDULER_NAME: Final = "my-scheduler"  # the chart's custom scheduler, named in Neuron pods' schedulerName
NEURON_CORES_PER_DEVICE: Final = 2  # inf2 / trn1: one aws.amazon.com/neuron device holds 2 NeuronCores

# Neuron SDK: part of the compiled-artifact key, since artifacts compiled by one SDK do not load on
# another. The Neuron base image below is named from it, so a bump changes both (and recompiles).
NEURON_SDK_VERSION: Final = "2.31.1"
# optimum-neuron, installed into the Neuron image (app/Dockerfile's OPTIMUM_NEURON_VERSION build-arg).
OPTIMUM_NEURON_VERSION: Final = "0.4.5"

# EKS managed add-ons.
POD_IDENTITY_AGENT_ADDON_VERSION: Final = "v1.3.10-eksbuild.2"
CLOUDWATCH_OBSERVABILITY_ADDON_VERSION: Final = "v6.0.1-eksbuild.1"

# Deep Learning Container bases for the service image, per accelerator. The GPU
# `pytorch-inference` line ended support in mid-2026; its successor is the unified PyTorch DLC.
DLC_REGISTRY_ACCOUNT: Final = "763104351884"
_DLC_REGISTRY: Final = DLC_REGISTRY_ACCOUNT + ".dkr.ecr.{region}.amazonaws.com"  # {region}: the stack's
NEURON_BASE_IMAGE: Final = (
    f"{_DLC_REGISTRY}/pytorch-inference-neuronx:2.9.0-neuronx-py312-sdk{NEURON_SDK_VERSION}-ubuntu24.04"
)
NVIDIA_BASE_IMAGE: Final = f"{_DLC_REGISTRY}/pytorch:2.9.0-gpu-py312-cu130-ubuntu22.04-ec2"
BASE_IMAGES: Final = {"neuron": NEURON_BASE_IMAGE, "nvidia": NVIDIA_BASE_IMAGE}

# Runtime of the image-build trigger handlers in lambdas/ (tested against this runtime's boto3).
LAMBDA_PYTHON_RUNTIME: Final = "python3.13"

# CodeBuild image that runs `docker build` (privileged).
CODEBUILD_IMAGE: Final = "aws/codebuild/amazonlinux-x86_64-standard:5.0"

# Base of the routing controller's own image (routing_controller/Dockerfile): the Docker official
# Python image through its ECR Public mirror (no Docker Hub pull limits in CodeBuild). Python 3.13
# matches LAMBDA_PYTHON_RUNTIME. Not verifiable offline: on docs/platform.md's verify-on-first-deploy list.
ROUTING_CONTROLLER_BASE_IMAGE: Final = "public.ecr.aws/docker/library/python:3.13-slim-bookworm"
