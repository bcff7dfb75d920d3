"""The bound on lookups waiting on the engine at once: the forwarded GETs (/v1/models, /v1/models/{id}) and, with
RENDER_ROUTES on, the render POSTs (llm_gateway/routes.py).

Generations pass admission (llm_gateway/admission.py); lookups cost the engine little but each holds an engine
connection and a client connection while it waits, so a flood of them against a busy or stuck engine would spend
the gateway's open files. Beyond the bound a lookup is refused at once (429), not queued.
"""

from __future__ import annotations


class LookupLimit:
    """At most `limit` lookups at a time."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    def try_take(self) -> bool:
        """Count one more lookup, or False when `limit` are in flight already."""
        if self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    def give_back(self) -> None:
        """One lookup ended (answered, failed or timed out)."""
        self.in_flight -= 1
