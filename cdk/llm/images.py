"""The LLM's image of ours: the gateway (llm_gateway/Dockerfile), which also runs the pods' model fetch.

Its build context and buildspec are listed with the other images' in cdk/constructs/image_builds.py.
"""

from __future__ import annotations

from typing import Final

from cdk import versions
from cdk.constructs.image_builds import LLM_GATEWAY_BUILDSPEC, LLM_GATEWAY_EXCLUDES, SmallImage

LLM_GATEWAY_IMAGE: Final = SmallImage(
    kind="llm-gateway",
    build="llmGateway",
    construct_prefix="LlmGateway",
    buildspec=LLM_GATEWAY_BUILDSPEC,
    excludes=LLM_GATEWAY_EXCLUDES,
    base_image=versions.LLM_GATEWAY_BASE_IMAGE,
    description="the LLM gateway image",
)
