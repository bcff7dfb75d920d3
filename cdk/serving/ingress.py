"""The ALB Ingress (AWS Load Balancer Controller), as a plain dict.

The LBC creates the ALB at run time from this object, named `cfg.load_balancer_name` so the
dashboard and alarms can find its metrics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cdk.config.serving import ServingConfig
from cdk.serving.routing import (
    CAPACITY_SERVICE_NAME,
    SERVICE_PORT,
    WEIGHTED_ACTION_NAME,
    weighted_action_annotation,
)
from common.probe_paths import HEALTH_PATH
from routing_controller import annotation

INGRESS_NAME: Final = "sd"
ACCESS_LOG_PREFIX: Final = "alb"
_LBC: Final = "alb.ingress.kubernetes.io/"
# The LLM routes' own weighted action (llmEnabled), moved by a routing controller instance of its own
# (routing_controller_workload.llm_routing), whose admission guard keeps it off WEIGHTED_ACTION_NAME's.
LLM_ACTION_NAME: Final = "llm-weighted"
# The OpenAI routes the LLM gateway serves (llm_gateway/routes.py). Exact paths: the load balancer controller
# orders Exact paths before every Prefix path ("Beginning from v2.4.3 ... pathType: Exact paths are always
# ordered first", kubernetes-sigs.github.io/aws-load-balancer-controller guide/ingress/spec), so they win
# over the image service's `/`, which keeps everything else (its /v1/generate, /v1/jobs, the UI).
LLM_PATHS: Final = ("/v1/models", "/v1/completions", "/v1/chat/completions")
LLM_PROMPT_PATHS: Final = LLM_PATHS[1:]  # the POSTs whose bodies are prompts


def annotations(
    cfg: ServingConfig,
    *,
    weights: Mapping[str, int] | None,
    access_log_bucket: str | None,
    waf_acl_arn: str | None = None,
    vpc_cidr: str | None = None,
    subnet_ids: Sequence[str] = (),
) -> dict[str, str]:
    """The LBC annotations: listeners, health check, timeouts, drain, logs, CIDRs, subnets, WAF and routing.

    `subnet_ids`: the load balancer's own subnets (the serving pods' NetworkPolicy admits only them), named
    explicitly instead of found by the controller's subnet tags.

    `cloudfront` front door: an internal ALB with one HTTP listener that admits only the VPC's CIDR
    (CloudFront's VPC-origin interfaces). `alb-https`: HTTPS with the given certificate, HTTP
    redirected to it, the allow-list (or everyone: sign-in and WAF guard it) on both ports.
    """
    lb_attributes = [
        f"idle_timeout.timeout_seconds={cfg.idle_timeout_s}",
        "routing.http.drop_invalid_header_fields.enabled=true",
    ]
    if access_log_bucket is not None:
        lb_attributes += [
            "access_logs.s3.enabled=true",
            f"access_logs.s3.bucket={access_log_bucket}",
            f"access_logs.s3.prefix={ACCESS_LOG_PREFIX}",
        ]
    result = {
        f"{_LBC}load-balancer-name": cfg.load_balancer_name,
        f"{_LBC}scheme": "internet-facing" if cfg.front_door.internet_facing else "internal",
        f"{_LBC}target-type": "ip",
        f"{_LBC}healthcheck-path": HEALTH_PATH,
        f"{_LBC}healthcheck-port": "traffic-port",
        f"{_LBC}healthcheck-interval-seconds": "10",
        f"{_LBC}healthy-threshold-count": "2",
        f"{_LBC}unhealthy-threshold-count": "3",
        f"{_LBC}success-codes": "200",
        f"{_LBC}load-balancer-attributes": ",".join(lb_attributes),
        f"{_LBC}target-group-attributes": f"deregistration_delay.timeout_seconds={cfg.deregistration_delay_s}",
    }
    door = cfg.front_door
    if door.route == "alb-https":
        if door.certificate_arn is None:
            raise ValueError("alb-https needs ingressCertificateArn (checked by FrontDoorConfig)")
        result[f"{_LBC}inbound-cidrs"] = ",".join(cfg.allowed_cidrs or ("0.0.0.0/0",))
        result[f"{_LBC}listen-ports"] = json.dumps([{"HTTP": 80}, {"HTTPS": 443}], separators=(",", ":"))
        result[f"{_LBC}certificate-arn"] = door.certificate_arn
        result[f"{_LBC}ssl-redirect"] = "443"
        result[f"{_LBC}ssl-policy"] = "ELBSecurityPolicy-TLS13-1-2-2021-06"
    else:
        if vpc_cidr is None:
            raise ValueError("the cloudfront front door admits the VPC's CIDR: pass vpc_cidr")
        result[f"{_LBC}inbound-cidrs"] = vpc_cidr
        result[f"{_LBC}listen-ports"] = json.dumps([{"HTTP": 80}], separators=(",", ":"))
    if subnet_ids:
        result[f"{_LBC}subnets"] = ",".join(subnet_ids)
    if waf_acl_arn is not None:
        result[f"{_LBC}wafv2-acl-arn"] = waf_acl_arn
    if weights is not None:
        key, value = weighted_action_annotation(weights)
        result[key] = value
    return result


@dataclass(frozen=True)
class LlmRoutes:
    """Where the OpenAI routes go: a weighted split over the LLM Services (cost modes), or one Service."""

    weights: Mapping[str, int] | None  # LLM Service -> weight; None: `capacity_service` across all LLM pods
    capacity_service: str | None = None

    def annotations(self) -> dict[str, str]:
        """The weighted action's annotation, in the cost modes."""
        if self.weights is None:
            return {}
        return {annotation.annotation_key(LLM_ACTION_NAME): annotation.encode(self.weights, SERVICE_PORT)}

    def paths(self) -> list[dict[str, Any]]:
        """One Exact path per OpenAI route, to the action or the all-pods Service."""
        if self.weights is not None:
            backend = {"service": {"name": LLM_ACTION_NAME, "port": {"name": "use-annotation"}}}
        elif self.capacity_service is not None:
            backend = {"service": {"name": self.capacity_service, "port": {"number": SERVICE_PORT}}}
        else:
            raise ValueError("LLM routes need weights or a capacity Service")
        return [{"path": path, "pathType": "Exact", "backend": backend} for path in LLM_PATHS]


def ingress(
    cfg: ServingConfig,
    *,
    weights: Mapping[str, int] | None,
    access_log_bucket: str | None,
    waf_acl_arn: str | None = None,
    vpc_cidr: str | None = None,
    subnet_ids: Sequence[str] = (),
    llm: LlmRoutes | None = None,
) -> dict[str, Any]:
    """The Ingress: `/` (UI and API) to the weighted action (cost) or the all-pods Service (capacity); with
    `llm`, the OpenAI routes to the LLM Services first."""
    if weights is not None:
        backend = {"service": {"name": WEIGHTED_ACTION_NAME, "port": {"name": "use-annotation"}}}
    else:
        backend = {"service": {"name": CAPACITY_SERVICE_NAME, "port": {"number": SERVICE_PORT}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": INGRESS_NAME,
            "namespace": cfg.namespace,
            "annotations": annotations(
                cfg,
                weights=weights,
                access_log_bucket=access_log_bucket,
                waf_acl_arn=waf_acl_arn,
                vpc_cidr=vpc_cidr,
                subnet_ids=subnet_ids,
            )
            | (llm.annotations() if llm is not None else {}),
        },
        "spec": {
            "ingressClassName": "alb",
            "rules": [
                {
                    "http": {
                        "paths": [
                            *(llm.paths() if llm is not None else []),
                            {"path": "/", "pathType": "Prefix", "backend": backend},
                        ]
                    }
                }
            ],
        },
    }
