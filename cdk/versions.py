"""Every version the platform pins, in one place, so that a bump is a one-line change.

Nothing here floats: an unpinned chart, add-on or AMI changes what a redeploy creates without a
code change (an unpinned accelerated AMI has broken stacks like this one before).

Each pin carries its provenance in the comment right above it, in one of two forms, checked by
tests/cdk/test_versions_provenance.py:
- `Verified: <owner>/<repo>@<tag or commit> <file>` (or `Verified: PyPI|npm <package>==<version> ...`):
  read at that tag in the upstream source;
- `Verify on first deploy: ...`: no offline source exists (an ECR tag, an SSM parameter, an EKS
  add-on build); the pin is listed with its checking command in docs/first-deploy.md.
"""

from __future__ import annotations

from typing import Final

# Kubernetes: the newest minor that both aws-cdk-lib (KubernetesVersion.V1_36) and Karpenter 1.14 support.
# Verified: PyPI aws-cdk-lib==2.275.0 (aws_eks_v2.KubernetesVersion.V1_36); aws/karpenter-provider-aws@v1.14.1
# hack/docs/compatibilitymatrix_gen/compatibility.yaml (1.14.x: minK8sVersion 1.26, maxK8sVersion 1.36).
KUBERNETES_VERSION: Final = "1.36"
# Verified: aws/karpenter-provider-aws@v1.14.1 hack/docs/compatibilitymatrix_gen/compatibility.yaml (1.26-1.36),
# within aws-cdk-lib 2.275.0's KubernetesVersion (V1_30..V1_36).
SUPPORTED_KUBERNETES_VERSIONS: Final = ("1.34", "1.35", "1.36")

# The kubectl/helm Lambda layer is aws-cdk.lambda-layer-kubectl-v36 (requirements-cdk.txt,
# cdk/constructs/cluster.py): bump it with KUBERNETES_VERSION.

# Karpenter (OCI chart; ships the karpenter.sh/v1 and karpenter.k8s.aws/v1 CRDs in crds/).
# Verified: aws/karpenter-provider-aws@1d927085dd81 website/content/en/docs/getting-started/
# getting-started-with-karpenter/_index.md (`helm upgrade karpenter oci://public.ecr.aws/karpenter/karpenter`).
KARPENTER_CHART_REPOSITORY: Final = "oci://public.ecr.aws/karpenter/karpenter"
# Verified: aws/karpenter-provider-aws@1d927085dd81 charts/karpenter/Chart.yaml (version 1.14.1: the commit
# "docs: update for patch release v1.14.1"; its getting-started guide sets KARPENTER_VERSION="1.14.1",
# K8S_VERSION="1.36").
KARPENTER_CHART_VERSION: Final = "1.14.1"

# AL2023 accelerated AMIs for Karpenter, pinned by alias version (EC2NodeClass amiSelectorTerms).
# Karpenter resolves `al2023@<version>` to the SSM parameter /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/
# <arch>/<variant>/amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<version>/image_id
# (aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/al2023.go, resolvePath).
# Verified: awslabs/amazon-eks-ami@81fec2e89585 CHANGELOG.md ("AMI Release v20260714": for Kubernetes 1.36
# amazon-eks-node-al2023-x86_64-nvidia-1.36-v20260714 with NVIDIA driver 580.159.03 and
# amazon-eks-node-al2023-x86_64-neuron-1.36-v20260714 with aws-neuronx-dkms 2.29.0.0), the newest release
# the stored sources show; the region's SSM parameters are on the first-deploy checklist (docs/first-deploy.md).
AL2023_AMI_ALIAS: Final = "al2023@v20260714"

# AWS Load Balancer Controller: the newest version aws-cdk-lib ships an IAM policy for
# (AlbControllerVersion.V3_2_2); CDK pins its chart version with it.
# Verified: PyPI aws-cdk-lib==2.275.0 (aws_eks_v2.AlbControllerVersion.V3_2_2: version v3.2.2, helm chart 3.2.2).
ALB_CONTROLLER_VERSION: Final = "v3.2.2"
# The oldest controller a team's cluster may run for our Ingress (existingClusterLoadBalancerController=expect):
# v2.4.0 is the first release that "uses the new Ingress API version networking.k8s.io/v1" (its release notes), the
# only Ingress API Kubernetes 1.22 and later serve; every annotation cdk/front_door/ingress.py sets is documented
# from v2.2.0 on (load-balancer-name and ssl-redirect are absent up to v2.1.3).
# Verified: kubernetes-sigs/aws-load-balancer-controller@v2.4.0 docs/guide/ingress/annotations.md
ALB_CONTROLLER_MIN_VERSION: Final = "v2.4.0"
# The controller's image comes from the EKS add-on registry of the cluster's own region (aws-cdk-lib's default,
# 602401143452.dkr.ecr.us-west-2, is another region's: cross-region, and unreachable from opt-in regions).
# Verified: kubernetes-sigs/aws-load-balancer-controller@v3.2.2 scripts/run-e2e-test.sh (the prod image is
# $PROD_IMAGE_REGISTRY/amazon/aws-load-balancer-controller, with the EKS registry 602401143452.dkr.ecr.<region>).
ALB_CONTROLLER_IMAGE_REPOSITORY: Final = "amazon/aws-load-balancer-controller"
# Verified: awsdocs/amazon-eks-user-guide@1cc6ebb4a163 latest/ug/workloads/add-ons-images.adoc (the registry table,
# copied as written). ap-east-2 is left out: the table gives it a host in ap-east-1.
EKS_ADDON_REGISTRIES: Final = {
    "af-south-1": "877085696533.dkr.ecr.af-south-1.amazonaws.com",
    "ap-east-1": "800184023465.dkr.ecr.ap-east-1.amazonaws.com",
    "ap-southeast-3": "296578399912.dkr.ecr.ap-southeast-3.amazonaws.com",
    "ap-south-2": "900889452093.dkr.ecr.ap-south-2.amazonaws.com",
    "ap-southeast-4": "491585149902.dkr.ecr.ap-southeast-4.amazonaws.com",
    "ap-southeast-6": "333609536671.dkr.ecr.ap-southeast-6.amazonaws.com",
    "ap-south-1": "602401143452.dkr.ecr.ap-south-1.amazonaws.com",
    "ap-northeast-3": "602401143452.dkr.ecr.ap-northeast-3.amazonaws.com",
    "ap-northeast-2": "602401143452.dkr.ecr.ap-northeast-2.amazonaws.com",
    "ap-southeast-1": "602401143452.dkr.ecr.ap-southeast-1.amazonaws.com",
    "ap-southeast-2": "602401143452.dkr.ecr.ap-southeast-2.amazonaws.com",
    "ap-southeast-7": "121268973566.dkr.ecr.ap-southeast-7.amazonaws.com",
    "ap-northeast-1": "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com",
    "cn-north-1": "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn",
    "cn-northwest-1": "961992271922.dkr.ecr.cn-northwest-1.amazonaws.com.cn",
    "eu-central-1": "602401143452.dkr.ecr.eu-central-1.amazonaws.com",
    "eu-west-1": "602401143452.dkr.ecr.eu-west-1.amazonaws.com",
    "eu-west-2": "602401143452.dkr.ecr.eu-west-2.amazonaws.com",
    "eu-south-1": "590381155156.dkr.ecr.eu-south-1.amazonaws.com",
    "eu-west-3": "602401143452.dkr.ecr.eu-west-3.amazonaws.com",
    "eu-south-2": "455263428931.dkr.ecr.eu-south-2.amazonaws.com",
    "eu-north-1": "602401143452.dkr.ecr.eu-north-1.amazonaws.com",
    "eu-central-2": "900612956339.dkr.ecr.eu-central-2.amazonaws.com",
    "il-central-1": "066635153087.dkr.ecr.il-central-1.amazonaws.com",
    "mx-central-1": "730335286997.dkr.ecr.mx-central-1.amazonaws.com",
    "me-south-1": "558608220178.dkr.ecr.me-south-1.amazonaws.com",
    "me-central-1": "759879836304.dkr.ecr.me-central-1.amazonaws.com",
    "us-east-1": "602401143452.dkr.ecr.us-east-1.amazonaws.com",
    "us-east-2": "602401143452.dkr.ecr.us-east-2.amazonaws.com",
    "us-west-1": "602401143452.dkr.ecr.us-west-1.amazonaws.com",
    "us-west-2": "602401143452.dkr.ecr.us-west-2.amazonaws.com",
    "ca-central-1": "602401143452.dkr.ecr.ca-central-1.amazonaws.com",
    "ca-west-1": "761377655185.dkr.ecr.ca-west-1.amazonaws.com",
    "sa-east-1": "602401143452.dkr.ecr.sa-east-1.amazonaws.com",
    "us-gov-east-1": "151742754352.dkr.ecr.us-gov-east-1.amazonaws.com",
    "us-gov-west-1": "013241004608.dkr.ecr.us-gov-west-1.amazonaws.com",
    "eusc-de-east-1": "877088126301.dkr.ecr.eusc-de-east-1.amazonaws.eu",
}

# KEDA.
# Verified: kedacore/charts@v2.20.1 README.md (`helm repo add kedacore https://kedacore.github.io/charts`).
KEDA_CHART_REPOSITORY: Final = "https://kedacore.github.io/charts"
# Verified: kedacore/charts@v2.20.1 keda/Chart.yaml (version 2.20.1, appVersion 2.20.1, kubeVersion >=v1.23.0-0).
KEDA_CHART_VERSION: Final = "2.20.1"

# NVIDIA device plugin.
# Verified: NVIDIA/k8s-device-plugin@v0.20.0 README.md (`helm repo add nvdp https://nvidia.github.io/k8s-device-plugin`).
NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY: Final = "https://nvidia.github.io/k8s-device-plugin"
# Verified: NVIDIA/k8s-device-plugin@v0.20.0 deployments/helm/nvidia-device-plugin/Chart.yaml (version 0.20.0).
NVIDIA_DEVICE_PLUGIN_CHART_VERSION: Final = "0.20.0"

# Neuron Helm chart: the device plugin (aws.amazon.com/neuron); its scheduler extension only when a pod asks
# for more than one device (cdk/constructs/addons/neuron.py says why).
# Verified: aws-neuron/neuron-helm-charts@2f5072d772b5 charts/neuron-helm-chart/README.md
# (`helm upgrade --install neuron-helm-chart oci://public.ecr.aws/neuron/neuron-helm-chart`).
NEURON_CHART_REPOSITORY: Final = "oci://public.ecr.aws/neuron/neuron-helm-chart"
# Verified: aws-neuron/neuron-helm-charts@1a1d41e3611b charts/neuron-helm-chart/Chart.yaml (version 1.1.2) and
# values.yaml at the same commit (devicePlugin.nodeSelector/tolerations, scheduler.enabled default false,
# scheduler.customScheduler.image {repository, tag: v1.28.5-eks-1-28-latest}, npd.enabled).
NEURON_CHART_VERSION: Final = "1.1.2"
# Verified: aws-neuron/neuron-helm-charts@1a1d41e3611b charts/neuron-helm-chart/values.yaml
# (scheduler.customScheduler.fullnameOverride: my-scheduler, the schedulerName of the second scheduler).
NEURON_SCHEDULER_NAME: Final = "my-scheduler"
# The chart's second kube-scheduler must be of the cluster's own minor (chart 1.1.2 ships 1.28, the newest chart
# README 1.31); upstream publishes one per Kubernetes release.
# Verified: kubernetes/kubernetes@008b3652959c CHANGELOG/CHANGELOG-1.36.md (v1.36.0 container images:
# registry.k8s.io/kube-scheduler:v1.36.0).
NEURON_KUBE_SCHEDULER_IMAGE_REPOSITORY: Final = "registry.k8s.io/kube-scheduler"
# Verified: kubernetes/kubernetes@008b3652959c CHANGELOG/CHANGELOG-1.36.md (registry.k8s.io/kube-scheduler:v1.36.0).
NEURON_KUBE_SCHEDULER_IMAGE_TAG: Final = "v1.36.0"

# Neuron SDK: part of the compiled-artifact key, since artifacts compiled by one SDK do not load on
# another. The Neuron base image below is named from it, so a bump changes both (and recompiles).
# Verified: aws-neuron/deep-learning-containers@2.26.1 pytorch/inference/2.8.0/Dockerfile.neuronx
# (neuronx-cc 2.21.33363.0, torch-neuronx 2.8.0.2.10.16998: exactly the pins of optimum-neuron 0.4.5's `neuronx` extra).
NEURON_SDK_VERSION: Final = "2.26.1"
# optimum-neuron, installed into the Neuron image (app/Dockerfile's OPTIMUM_NEURON_VERSION build-arg).
# Verified: PyPI optimum-neuron==0.4.5 wheel METADATA (Requires-Python <3.12,>=3.10; transformers~=4.57.1;
# extra neuronx: torch-neuronx==2.8.0.2.10.16998, neuronx-cc==2.21.33363.0, torch==2.8.0.*;
# extra diffusers: diffusers==0.35.*).
OPTIMUM_NEURON_VERSION: Final = "0.4.5"

# EKS managed add-ons.
# Verify on first deploy: `aws eks describe-addon-versions` for Kubernetes 1.36 (docs/first-deploy.md); only
# third-party configurations name this build offline.
POD_IDENTITY_AGENT_ADDON_VERSION: Final = "v1.3.10-eksbuild.2"
# Verify on first deploy: `aws eks describe-addon-versions` for Kubernetes 1.36 (docs/first-deploy.md); the CloudWatch
# User Guide ("Install the CloudWatch agent with the Amazon CloudWatch Observability EKS add-on") names this build.
CLOUDWATCH_OBSERVABILITY_ADDON_VERSION: Final = "v6.0.1-eksbuild.1"

# Deep Learning Container bases for the service image, per accelerator. The GPU
# `pytorch-inference` line ended support in mid-2026; its successor is the unified PyTorch DLC.
# Verified: aws/deep-learning-containers@e0ecedea6a1c docs/src/global.yml (example_ecr_account 763104351884,
# example_region us-west-2); other regions' accounts differ (the deploy resolves them).
DLC_REGISTRY_ACCOUNT: Final = "763104351884"
_DLC_REGISTRY: Final = DLC_REGISTRY_ACCOUNT + ".dkr.ecr.{region}.amazonaws.com"  # {region}: the stack's
# Python 3.11, torch-neuronx 2.8, Neuron SDK 2.26.1, Ubuntu 22.04 (the line optimum-neuron 0.4.5 pins).
# Verified: aws/deep-learning-containers@e0ecedea6a1c docs/src/data/pytorch-inference-neuronx/2.8-neuronx-sdk2.26.1.yml
# (tag 2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04); aws-neuron/deep-learning-containers@2.27.0 README.md (same tag).
NEURON_BASE_IMAGE: Final = (
    f"{_DLC_REGISTRY}/pytorch-inference-neuronx:2.8.0-neuronx-py311-sdk{NEURON_SDK_VERSION}-ubuntu22.04"
)
# Python 3.12, torch 2.13.0, CUDA 13.3, Amazon Linux 2023: the same torch line as the CPU service (requirements).
# Verified: aws/deep-learning-containers@e0ecedea6a1c docs/src/data/pytorch/2.13-cuda-ec2.yml (tag
# 2.13.0-cu133-amzn2023, py312, repository `pytorch`) and .github/config/image/pytorch/2.13-ec2-cuda.yml
# (python 3.12, torch 2.13.0, os amzn2023, release to the private and public registries).
NVIDIA_BASE_IMAGE: Final = f"{_DLC_REGISTRY}/pytorch:2.13.0-cu133-amzn2023"
BASE_IMAGES: Final = {"neuron": NEURON_BASE_IMAGE, "nvidia": NVIDIA_BASE_IMAGE}

# Runtime of the image-build trigger handlers in lambdas/ (tested against this runtime's boto3).
# Verified: PyPI aws-cdk-lib==2.275.0 (aws_lambda.Runtime.PYTHON_3_13.name == "python3.13").
LAMBDA_PYTHON_RUNTIME: Final = "python3.13"

# CodeBuild image that runs `docker build` (privileged).
# Verified: PyPI aws-cdk-lib==2.275.0 (aws_codebuild.LinuxBuildImage.AMAZON_LINUX_2023_5.image_id).
CODEBUILD_IMAGE: Final = "aws/codebuild/amazonlinux-x86_64-standard:5.0"
# Python of the weights-staging build on that image (runtime-versions). requirements-stage.txt is resolved for it.
# Verified: aws/aws-codebuild-docker-images@0c5eb16 al/x86_64/standard/5.0/runtimes.yml (python 3.9-3.14)
STAGE_PYTHON_VERSION: Final = "3.12"

# Base of the routing controller's own image (routing_controller/Dockerfile): the Docker official
# Python image through its ECR Public mirror (no Docker Hub pull limits in CodeBuild). Python 3.13
# matches LAMBDA_PYTHON_RUNTIME.
# Verify on first deploy: docs/first-deploy.md (an ECR Public tag).
ROUTING_CONTROLLER_BASE_IMAGE: Final = "public.ecr.aws/docker/library/python:3.13-slim-bookworm"

# Base of the LLM gateway's own image (llm_gateway/Dockerfile), beside vLLM on each LLM pod: the routing
# controller's image line (Docker official, slim, bookworm, through ECR Public) at the Python of the vLLM
# images it runs beside, 3.12, so one Python serves the whole pod. llm_gateway/requirements.lock is resolved
# for LLM_GATEWAY_PYTHON (tests/llm/test_gateway_image.py checks its header).
# Verified: docker-library/official-images@01732a42e52e library/python (3.12-slim-bookworm, amd64);
# aws-neuron/deep-learning-containers@e22ca08ebc66 vllm/inference/0.16.0/Dockerfile.neuronx (PYTHON=python3.12,
# the pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04 image);
# aws/deep-learning-containers@559bbcd94e72 docs/src/data/vllm/0.27.1-gpu-ec2.yml (python: py312, tag
# 0.27.1-gpu-py312-cu130-ubuntu22.04-ec2).
LLM_GATEWAY_PYTHON: Final = "3.12"
# Verify on first deploy: docs/first-deploy.md (an ECR Public tag).
LLM_GATEWAY_BASE_IMAGE: Final = f"public.ecr.aws/docker/library/python:{LLM_GATEWAY_PYTHON}-slim-bookworm"

# What each base image brings, for its locked requirement set (app/requirements/<accelerator>.lock,
# `make lock`): the locks are resolved for this Python and platform, and against this torch, which
# stays the DLC's own build (it is left out of the lock). tests/app/test_image_locks.py ties them to
# the tags above.
# Verified: aws-neuron/deep-learning-containers@2.26.1 pytorch/inference/2.8.0/Dockerfile.neuronx (PYTHON=python3.11);
# aws/deep-learning-containers@e0ecedea6a1c docs/src/data/pytorch/2.13-cuda-ec2.yml (python: py312).
BASE_IMAGE_PYTHON: Final = {"neuron": "3.11", "nvidia": "3.12"}
# Verified: aws-neuron/deep-learning-containers@2.26.1 pytorch/inference/2.8.0/Dockerfile.neuronx (torch 2.8.0,
# torch-neuronx 2.8.0.2.10); aws/deep-learning-containers@e0ecedea6a1c docker/pytorch/2.13/cuda/pyproject.toml
# (torch 2.13.0).
BASE_IMAGE_TORCH: Final = {"neuron": "2.8.0", "nvidia": "2.13.0"}
# Both DLCs install torch wheels tagged manylinux_2_28, so that glibc floor holds on both (Ubuntu 22.04,
# Amazon Linux 2023); x86_64 (inf2/trn1, g5/g6).
# Verified: PyPI torch==2.8.0 (torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl, pip download) and torch==2.13.0
# (torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl, the same release line's platform tag).
BASE_IMAGE_PLATFORM: Final = {"neuron": "x86_64-manylinux_2_28", "nvidia": "x86_64-manylinux_2_28"}

# ---------------------------------------------------------------------------------------------------------------
# LLM serving (issue 18): vLLM from AWS's Deep Learning Containers, one image per accelerator, and the default model.
# Evidence, the start-up mechanism and open questions: docs/evidence/llm-serving.md.
# Verify on first deploy (ECR Public tags cannot be read offline; each command must print a manifest):
#   docker manifest inspect \
#     public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04
#   docker manifest inspect public.ecr.aws/deep-learning-containers/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-ec2
# and that the default model is still on the Hub, ungated (the JSON's "gated" is false; "sha" is its newest commit):
#   curl -sf https://huggingface.co/api/models/Qwen/Qwen2.5-1.5B-Instruct
# ---------------------------------------------------------------------------------------------------------------

# inf2: the newest vLLM Neuron line whose Neuron SDK still supports NxD Inference models (and their NKI kernels) on
# Inf2. From SDK 2.29 NxD Inference supports Trn2 and newer only ("Customers who require NxD Inference kernel
# support on Trn1 or Inf2 instances should pin to release 2.28"), although the DLC table still lists inf2 for the
# vLLM 0.16.0 images of SDK 2.29-2.31.1; SDK 2.32 publishes no NxD Inference vLLM image at all.
# Verified: aws-neuron/deep-learning-containers@2.28.0 README.md (VLLM 0.13.0, Neuron 2.28.0, trn1,trn2,trn3,inf2,
# py312, this tag) and vllm/inference/0.13.0/Dockerfile.neuronx (vllm-neuron release-0.4.1,
# neuronx_distributed_inference 0.8.16251, nki 0.2.0, python 3.12.11, ENTRYPOINT vllm_entrypoint.py, CMD /bin/bash);
# aws-neuron/aws-neuron-sdk@81ce03ae261e release-notes/components/nxd-inference.rst (2.29.0 breaking changes).
VLLM_NEURON_IMAGE: Final = (
    "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
)
# Verified: aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/vllm-user-guide-v1.rst
# (Plugin Version 0.4.1, Neuron SDK Version 2.28.0, vLLM Version 0.13.0, PyTorch Version 2.9.0).
# Its OpenAI server has /v1/responses and /v1/embeddings (the latter for `--runner pooling` models), answering 400
# "The model does not support ... API" where the model cannot: read in PyPI's vllm-0.13.0 wheel
# (vllm/entrypoints/openai/api_server.py, vllm/entrypoints/pooling/embed/api_router.py; llm_gateway/unserved.py).
VLLM_NEURON_VLLM_VERSION: Final = "0.13.0"
# Part of the compiled-artifact key (artifacts of one SDK do not load on another).
# Verified: aws-neuron/deep-learning-containers@2.28.0 README.md (Neuron SDK Version: Neuron 2.28.0 for this tag).
VLLM_NEURON_SDK_VERSION: Final = "2.28.0"

# NVIDIA: the vllm DLC, Ubuntu line (upstream vllm/vllm-openai:v0.27.1 base); ENTRYPOINT runs `vllm serve "$@"`, so a
# pod passes only `args`.
# Verified: aws/deep-learning-containers@e0ecedea6a1c docs/src/data/vllm/0.27.1-gpu-ec2.yml (tags
# 0.27.1-gpu-py312-cu130-ubuntu22.04-ec2, python py312, cuda cu130, public_registry true) and
# .github/config/image/vllm/ec2-ubuntu.yml (base_image vllm/vllm-openai:v0.27.1, python 3.12, cuda 13.0.2,
# target vllm-ec2 of docker/vllm/Dockerfile: ENTRYPOINT scripts/docker/vllm/dockerd_entrypoint.sh).
VLLM_NVIDIA_IMAGE: Final = "public.ecr.aws/deep-learning-containers/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-ec2"
# Its ENTRYPOINT, which a pod that sets `command` runs itself (docs/evidence/llm-serving.md section 2).
# Verified: aws/deep-learning-containers@e0ecedea6a1c docker/vllm/Dockerfile stage vllm-ec2
# (ENTRYPOINT ["/usr/local/bin/dockerd_entrypoint.sh"]).
VLLM_NVIDIA_ENTRYPOINT: Final = "/usr/local/bin/dockerd_entrypoint.sh"
# Verified: aws/deep-learning-containers@e0ecedea6a1c .github/config/image/vllm/ec2-ubuntu.yml
# (framework_version 0.27.1); PyPI vllm==0.27.1 (vllm/_version.py: 0.27.1).
# Its /v1/responses was not read here (0.13.0 and 0.32.0 serve it; the build machine's index had no 0.27.1 when the
# route was added): a row of docs/first-deploy.md checks it.
VLLM_NVIDIA_VLLM_VERSION: Final = "0.27.1"

# Default LLM: Apache-2.0, not gated, Qwen2ForCausalLM (12 query heads, 2 KV heads: tensor parallel degree 1 or 2),
# about 3.1 GB in bf16, so it fits one inf2.xlarge (2 NeuronCores) and one 24 GB L4/A10G. The revision is not pinned
# here: no upstream source names the Hub commit offline (docs/evidence/llm-serving.md gives a candidate and the check).
# Verified: aws-neuron/aws-neuron-sdk@85e68631b51b libraries/nxd-inference/developer_guides/model-reference.rst
# (Qwen2.5, NeuronQwen2ForCausalLM, compatible checkpoint https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct).
LLM_DEFAULT_MODEL_ID: Final = "Qwen/Qwen2.5-1.5B-Instruct"

# vLLM's router (`llmRouter`, cdk/llm/router.py): the newest release on PyPI; its Rust router ships in the wheel.
# Verified: PyPI vllm-router==0.1.17 (`pip index versions vllm-router`: 0.1.17 newest; installed into
# .cache/vllm-router-venv, whose `vllm-router --help` lists the flags cdk/llm/router.py passes). llm_router/
# requirements.lock installs it; tests/cdk/test_llm_router.py ties the lock to this pin.
VLLM_ROUTER_VERSION: Final = "0.1.17"
