"""The LLM's image of ours: the gateway (llm_gateway/Dockerfile), which also runs the pods' model fetch.

Its build context is its own folders and the shared runtime (cdk/constructs/image_builds.py SHARED_RUNTIME).
"""

from __future__ import annotations

from typing import Final

from cdk import versions
from cdk.constructs.image_builds import SHARED_RUNTIME, SmallImage

# The LLM gateway's image (llm_gateway/Dockerfile): its own package, the LLM pods' model fetch (model_fetch/), the
# LLM benchmark's client (llm_bench/), the shared runtime and its buildspec; nothing of the image service.
LLM_GATEWAY_BUILDSPEC = "buildspecs/llm-gateway.yml"
LLM_GATEWAY_EXCLUDES = [
    "*",
    ".*",
    "!llm_gateway",
    "!llm_gateway/**",
    "!model_fetch",
    "!model_fetch/**",
    "!llm_bench",
    "!llm_bench/**",
    *SHARED_RUNTIME,
    "!buildspecs",
    f"!{LLM_GATEWAY_BUILDSPEC}",
    "**/__pycache__",
    "**/*.pyc",
    "**/*.so",  # nothing compiled on this machine: the image installs its wheels from its lock
]

LLM_GATEWAY_IMAGE: Final = SmallImage(
    kind="llm-gateway",
    build="llmGateway",
    construct_prefix="LlmGateway",
    buildspec=LLM_GATEWAY_BUILDSPEC,
    excludes=LLM_GATEWAY_EXCLUDES,
    base_image=versions.LLM_GATEWAY_BASE_IMAGE,
    description="the LLM gateway image",
)

# The router's image (llm_router/Dockerfile, `llmRouter` on): the pinned vllm-router wheel on the gateway's base.
LLM_ROUTER_BUILDSPEC = "buildspecs/llm-router.yml"
LLM_ROUTER_IMAGE: Final = SmallImage(
    kind="llm-router",
    build="llmRouter",
    construct_prefix="LlmRouter",
    buildspec=LLM_ROUTER_BUILDSPEC,
    excludes=["*", ".*", "!llm_router", "!llm_router/**", "!buildspecs", f"!{LLM_ROUTER_BUILDSPEC}"],
    base_image=versions.LLM_GATEWAY_BASE_IMAGE,
    description="the LLM router image",
)
