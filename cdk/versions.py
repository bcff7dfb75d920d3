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
NEURON_SDK_VERSION: Final = "2.26.1"
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
    f"{_DLC_REGISTRY}/pytorch-inference-neuronx:2.8.0-neuronx-py311-sdk{NEURON_SDK_VERSION}-ubuntu22.04"
)
NVIDIA_BASE_IMAGE: Final = f"{_DLC_REGISTRY}/pytorch:2.13.0-cu133-amzn2023"
BASE_IMAGES: Final = {"neuron": NEURON_BASE_IMAGE, "nvidia": NVIDIA_BASE_IMAGE}

# Runtime of the image-build trigger handlers in lambdas/ (tested against this runtime's boto3).
LAMBDA_PYTHON_RUNTIME: Final = "python3.13"

# CodeBuild image that runs `docker build` (privileged).
CODEBUILD_IMAGE: Final = "aws/codebuild/amazonlinux-x86_64-standard:5.0"

# What each base image brings, for its locked requirement set (app/requirements/<accelerator>.lock,
# `make lock`): the locks are resolved for this Python and platform, and against this torch, which
# stays the DLC's own build (it is left out of the lock). tests/app/test_image_locks.py ties them to
# the tags above.
# neuron: Python 3.11 and torch 2.8.0 (torch-neuronx 2.8.0.2.10), per aws-neuron/deep-learning-containers
#   tag 2.26.1, pytorch/inference/2.8.0/Dockerfile.neuronx (PYTHON=python3.11) and README.md.
# nvidia: Python 3.12 and torch 2.13.0, per aws/deep-learning-containers docker/pytorch/2.13/cuda/pyproject.toml
#   and docs/src/data/pytorch/2.13-cuda-ec2.yml (python: py312).
# Platform: both install torch wheels tagged manylinux_2_28 (PyPI / download.pytorch.org), so that glibc
#   floor holds on both (Ubuntu 22.04, Amazon Linux 2023); x86_64 (inf2/trn1, g5/g6).
BASE_IMAGE_PYTHON: Final = {"neuron": "3.11", "nvidia": "3.12"}
BASE_IMAGE_TORCH: Final = {"neuron": "2.8.0", "nvidia": "2.13.0"}
BASE_IMAGE_PLATFORM: Final = {"neuron": "x86_64-manylinux_2_28", "nvidia": "x86_64-manylinux_2_28"}
