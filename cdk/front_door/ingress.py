"""The ALB Ingress (AWS Load Balancer Controller), as a plain dict.

The LBC creates the ALB at run time from this object, named `cfg.load_balancer_name` so the
dashboard and alarms can find its metrics.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from cdk.config.serving import ServingConfig
from cdk.front_door.routes import Routes
from cdk.serving.model_store import ACCESS_LOG_PREFIX
from common.probe_paths import HEALTH_PATH

INGRESS_NAME: Final = "sd"
_LBC: Final = "alb.ingress.kubernetes.io/"


def annotations(
    cfg: ServingConfig,
    *,
    access_log_bucket: str | None,
    waf_acl_arn: str | None = None,
    vpc_cidr: str | None = None,
    subnet_ids: Sequence[str] = (),
) -> dict[str, str]:
    """The LBC annotations of the load balancer: listeners, health check, timeouts, drain, logs, CIDRs, subnets, WAF.

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
    return result


def ingress(
    cfg: ServingConfig,
    *,
    routes: Sequence[Routes],
    access_log_bucket: str | None,
    waf_acl_arn: str | None = None,
    vpc_cidr: str | None = None,
    subnet_ids: Sequence[str] = (),
) -> dict[str, Any]:
    """The Ingress: every workload's paths to its weighted action (cost modes) or its all-pods Service (capacity).

    Exact paths are listed before Prefix paths, and Prefix paths longest first, the order the load balancer
    controller evaluates them in ("Beginning from v2.4.3 ... pathType: Exact paths are always ordered first, followed
    by pathType: Prefix paths, with the longest prefix first", kubernetes-sigs.github.io/aws-load-balancer-controller
    guide/ingress/spec), so a workload's exact routes and longer prefixes win over another's `/`. Equally long
    Prefix paths keep their given order (v3.2.2 pkg/ingress/model_build_listener_rules.go sortIngressPaths:
    sort.SliceStable), so a pool route's `/` with a header condition is tried before its workload's plain `/`.
    """
    if not routes:
        raise ValueError("the Ingress needs at least one workload's routes")
    actions = [action for r in routes for action in r.actions]
    if len(set(actions)) != len(actions):
        raise ValueError(f"actions {actions} must be distinct: each workload routes its own")
    paths = [p for r in routes for p in r.ingress_paths()]
    annotations_ = annotations(
        cfg, access_log_bucket=access_log_bucket, waf_acl_arn=waf_acl_arn, vpc_cidr=vpc_cidr, subnet_ids=subnet_ids
    )
    for r in routes:
        annotations_ |= r.annotations()
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": INGRESS_NAME, "namespace": cfg.namespace, "annotations": annotations_},
        "spec": {
            "ingressClassName": "alb",
            "rules": [{"http": {"paths": sorted(paths, key=_controller_order)}}],
        },
    }


def _controller_order(path: dict[str, Any]) -> tuple[bool, int]:
    """Exact paths first (in their given order), then Prefix paths longest first (stable: `sorted` keeps ties)."""
    exact = path["pathType"] == "Exact"
    return (not exact, 0 if exact else -len(path["path"]))
