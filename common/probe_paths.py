"""The services' probe endpoints: served by the image service (app/api/probes.py) and the LLM gateway,
probed by the Kubernetes manifests and the ALB health check in cdk/. Every side imports these, so they
cannot drift apart. No heavy imports: the CDK app imports this module at synth time."""

from __future__ import annotations

from typing import Final

HEALTH_PATH: Final = "/health"  # liveness: the process and its event loop answer
READINESS_PATH: Final = "/readiness"  # 200 once the model is loaded and warmed up
