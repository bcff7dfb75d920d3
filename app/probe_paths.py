"""The service's probe endpoints: served by app/api/probes.py, probed by the Kubernetes manifests
and the ALB health check in cdk/serving/. Both sides import these, so they cannot drift apart.
No heavy imports: the CDK app imports this module at synth time."""

from __future__ import annotations

from typing import Final

HEALTH_PATH: Final = "/health"  # liveness: the process and its event loop answer
READINESS_PATH: Final = "/readiness"  # 200 once the model is loaded and warmed up
