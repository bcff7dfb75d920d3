"""The image models in the gateway's `/v1/models`: on the cluster the front door sends `/v1/models` (and
`/v1/models/{id}`) to the LLM gateway (cdk/llm/routes.py), so the one list a client reads there must also hold the
image service's model. The deploy names it (IMAGE_MODELS, from cdk/llm/workload.py); the gateway appends its entry,
in the image service's own shape (common/openai_models.py), to the engine's list.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from common.openai_models import image_model_entry


class ImageModels:
    """The image models the deploy serves beside this engine: `families` maps each id to its family."""

    def __init__(self, families: Mapping[str, str], created: int | None = None) -> None:
        # `created`: when this gateway started, as the image service gives its own start.
        when = int(time.time()) if created is None else created
        self.entries = [image_model_entry(model_id, family, when) for model_id, family in families.items()]

    def add_to(self, listing: bytes) -> bytes:
        """The engine's `/v1/models` body with the image models appended (an id the engine lists is left as the
        engine has it). A body that is not an OpenAI list comes back as it was: retrieve-model says why."""
        if not self.entries:
            return listing
        try:
            payload = json.loads(listing)
            data = payload["data"]
        except (ValueError, KeyError, TypeError):
            return listing
        if not isinstance(data, list):
            return listing
        listed = {entry.get("id") for entry in data if isinstance(entry, dict)}
        payload["data"] = [*data, *(entry for entry in self.entries if entry["id"] not in listed)]
        return json.dumps(payload).encode()
