"""The control loop: observe, decide, and when the weights change patch the Ingress, record an Event
and a JSON log line saying why; publish the weight in effect every period.

Kubernetes calls (kubernetes==36.0.3): NetworkingV1Api.read_namespaced_ingress and
patch_namespaced_ingress, the latter with `_content_type="application/merge-patch+json"` because
the client would otherwise label a dict body as a JSON Patch (ApiClient.select_header_content_type
picks the first listed type, application/json-patch+json); CoreV1Api.create_namespaced_event.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from kubernetes import client

from common import metric_names
from routing_controller import annotation
from routing_controller.cluster import ClusterReader
from routing_controller.decision import Decision, Hysteresis, PoolObservation, RoutingState, decide
from routing_controller.heartbeat import API_TIMEOUT_S
from routing_controller.settings import Settings

COMPONENT: Final = "sd-routing-controller"
EVENT_REASON: Final = "RoutingWeightsChanged"
MERGE_PATCH: Final = "application/merge-patch+json"
MAX_EVENT_MESSAGE: Final = 1024

LOG = logging.getLogger("routing_controller")


class MetricsClient(Protocol):
    """The part of boto3's CloudWatch client the loop uses."""

    def put_metric_data(self, **kwargs: Any) -> Any: ...


class Controller:
    """One controller instance: holds the last decision's state between periods."""

    def __init__(
        self,
        settings: Settings,
        api: client.ApiClient,
        cloudwatch: MetricsClient | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.reader = ClusterReader(api, settings.namespace)
        self.networking = client.NetworkingV1Api(api)
        self.core = client.CoreV1Api(api)
        self.cloudwatch = cloudwatch
        self.clock = clock
        self.hysteresis = Hysteresis(hold_s=settings.hold_s, band_pods=settings.band_pods)
        self.state: RoutingState | None = None

    def step(self) -> Decision:
        """One period: observe every pool, decide, apply a change, publish the weights."""
        now = self.clock()
        observed = {p.accelerator: self.reader.observe(p) for p in self.settings.pools}
        decision = decide(self.settings.cost_weights, observed, self.state, now, self.hysteresis)
        ingress = self.networking.read_namespaced_ingress(
            self.settings.ingress, self.settings.namespace, _request_timeout=API_TIMEOUT_S
        )
        applied = self._applied_weights(ingress)
        wanted = {p.service: decision.weights[p.accelerator] for p in self.settings.pools}
        if applied != wanted:
            reasons = decision.reasons or (f"the Ingress had {applied}, not the weights in effect",)
            self._patch(wanted)
            self._record(ingress, applied, wanted, reasons, observed, now)
        self.state = decision.state
        self._publish(decision.weights)
        return decision

    def _applied_weights(self, ingress: client.V1Ingress) -> dict[str, int] | None:
        value = (ingress.metadata.annotations or {}).get(annotation.annotation_key(self.settings.action))
        if value is None:
            return None
        try:
            return annotation.decode_weights(value)
        except ValueError:
            return None

    def _patch(self, wanted: Mapping[str, int]) -> None:
        body = annotation.patch_body(self.settings.action, wanted, self.settings.service_port)
        self.networking.patch_namespaced_ingress(
            self.settings.ingress,
            self.settings.namespace,
            body,
            _content_type=MERGE_PATCH,
            _request_timeout=API_TIMEOUT_S,
        )

    def _record(
        self,
        ingress: client.V1Ingress,
        applied: Mapping[str, int] | None,
        wanted: Mapping[str, int],
        reasons: tuple[str, ...],
        observed: Mapping[str, PoolObservation],
        now: float,
    ) -> None:
        message = f"weights {_weights_text(wanted)} (were {_weights_text(applied)}): " + "; ".join(reasons)
        LOG.info(
            json.dumps(
                {
                    "time": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(),
                    "event": EVENT_REASON,
                    "ingress": f"{self.settings.namespace}/{self.settings.ingress}",
                    "weights": dict(wanted),
                    "previous": dict(applied) if applied is not None else None,
                    "reasons": list(reasons),
                    "observed": {name: vars(obs) for name, obs in observed.items()},
                },
                sort_keys=True,
            )
        )
        stamp = dt.datetime.fromtimestamp(int(now), dt.UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{self.settings.ingress}.routing."),
            involved_object=client.V1ObjectReference(
                api_version="networking.k8s.io/v1",
                kind="Ingress",
                name=ingress.metadata.name,
                namespace=self.settings.namespace,
                uid=ingress.metadata.uid,
                resource_version=ingress.metadata.resource_version,
            ),
            reason=EVENT_REASON,
            message=message[:MAX_EVENT_MESSAGE],
            # A Warning while any accelerator is out of rotation, so `kubectl get events` flags it.
            type="Warning" if 0 in wanted.values() else "Normal",
            source=client.V1EventSource(component=COMPONENT, host=self.settings.instance),
            first_timestamp=stamp,
            last_timestamp=stamp,
            count=1,
        )
        self.core.create_namespaced_event(self.settings.namespace, event, _request_timeout=API_TIMEOUT_S)

    def _publish(self, weights: Mapping[str, int]) -> None:
        """The weight in effect per accelerator; a CloudWatch failure is logged, never fatal."""
        if self.cloudwatch is None:
            return
        spec = metric_names.ROUTING_WEIGHT
        data = [
            {
                "MetricName": spec.name,
                "Dimensions": [
                    {"Name": metric_names.DIMENSION_DEPLOYMENT_UNIT, "Value": p.deployment},
                    {"Name": metric_names.DIMENSION_ACCELERATOR, "Value": p.accelerator},
                ],
                "Value": float(weights[p.accelerator]),
                "Unit": spec.unit,
            }
            for p in self.settings.pools
        ]
        try:
            self.cloudwatch.put_metric_data(Namespace=metric_names.NAMESPACE, MetricData=data)
        except Exception as exc:  # metrics must not stop routing
            LOG.warning(json.dumps({"event": "MetricPublishFailed", "error": str(exc)}))


def _weights_text(weights: Mapping[str, int] | None) -> str:
    if weights is None:
        return "unset"
    return ", ".join(f"{name}={weight}" for name, weight in weights.items())
