"""The image service's API paths that the front door treats apart: served by app/ (app/api/openai_images.py),
named in cdk/ (the WAF's prompt paths). Both sides import these, so they cannot drift apart. No heavy imports:
the CDK app imports this module at synth time."""

from __future__ import annotations

from typing import Final

# OpenAI's Images API; every path under the prefix answers errors in OpenAI's shape (app/api/openai_errors.py).
OPENAI_IMAGES_PREFIX: Final = "/v1/images/"
IMAGES_GENERATIONS_PATH: Final = f"{OPENAI_IMAGES_PREFIX}generations"
# The LoRA adapters a request may name (app/api/adapters.py).
IMAGES_ADAPTERS_PATH: Final = f"{OPENAI_IMAGES_PREFIX}adapters"
IMAGES_EDITS_PATH: Final = f"{OPENAI_IMAGES_PREFIX}edits"

# The routes that ask the pool for images (the starting gate counts these as the demand that wakes a pool at zero,
# starting_gate/demand.py): the API's own, its jobs, and the UI's queue join (gradio 6.31 routes.py
# `/queue/join` under API_PREFIX "/gradio_api").
GENERATE_PATH: Final = "/v1/generate"
JOBS_PATH: Final = "/v1/jobs"
UI_QUEUE_JOIN_PATH: Final = "/gradio_api/queue/join"
