"""The one check every model catalog shares: a preset whose weights the Hub gates needs a token to stage them.

The Hub answers a gated repository's files with 401/403 to a client without a token of an account that accepted
the model's licence, so staging would fail at deploy time and roll the stack back; the synth stops first, naming
the setting that holds the token's Secrets Manager secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cdk.config.context import ConfigError

HUB_TOKEN_KEY: Final = "servingHubTokenSecretName"  # noqa: S105 (a setting name, not a secret)


def require_hub_token(values: Mapping[str, Any], *, catalog: str, preset: str, model_id: str, gated: bool) -> None:
    """Stop when `preset` of `catalog` ("LLM", "image model") stages gated weights and no token secret is named."""
    if gated and values.get(HUB_TOKEN_KEY) in (None, ""):
        raise ConfigError(
            f"setting '{HUB_TOKEN_KEY}' is required by the {catalog} preset {preset!r}: the Hub gates {model_id} "
            "(accept its licence, then store a token of that account in Secrets Manager and name the secret)"
        )
