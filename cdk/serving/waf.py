"""The regional AWS WAF web ACL in front of the service, associated with the ALB by the AWS Load
Balancer Controller (`alb.ingress.kubernetes.io/wafv2-acl-arn`; "Only Regional WAFv2 is supported",
docs/guide/ingress/annotations.md at LBC v3.2.2; the controller's policy in aws-cdk-lib 2.275,
aws-eks-v2/lib/addons/alb-iam_policy-v3.2.2.json, grants wafv2:AssociateWebACL).

Rules, in order: (cloudfront route with an allow-list) block callers outside ingressAllowedCidrs;
a per-client rate limit (wafRateLimit per wafRateWindowSeconds); AWS managed rule groups
AWSManagedRulesCommonRuleSet and AWSManagedRulesKnownBadInputsRuleSet (AWS WAF Developer Guide,
"Baseline rule groups"). On the cloudfront route the ALB sees CloudFront's VPC-origin addresses, so
the client is read from X-Forwarded-For, which CloudFront fills with the viewer's address.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from cdk.config.serving import ServingConfig

MANAGED_RULE_GROUPS: Final = ("AWSManagedRulesCommonRuleSet", "AWSManagedRulesKnownBadInputsRuleSet")
RATE_RULE_NAME: Final = "per-client-rate"
ALLOW_LIST_RULE_NAME: Final = "outside-allow-list"
FORWARDED_HEADER: Final = "X-Forwarded-For"


def _visibility(name: str) -> dict[str, Any]:
    return {"cloudWatchMetricsEnabled": True, "metricName": name, "sampledRequestsEnabled": True}


def rate_statement(cfg: ServingConfig) -> dict[str, Any]:
    """Count per client address: the source IP at an internet-facing ALB, the forwarded one behind CloudFront."""
    door = cfg.front_door
    statement: dict[str, Any] = {
        "limit": door.waf_rate_limit,
        "evaluationWindowSec": door.waf_rate_window_s,
        "aggregateKeyType": "IP",
    }
    if door.route == "cloudfront":
        # MATCH: a request without the header (not through CloudFront) is counted as one client.
        statement["aggregateKeyType"] = "FORWARDED_IP"
        statement["forwardedIpConfig"] = {"headerName": FORWARDED_HEADER, "fallbackBehavior": "MATCH"}
    return statement


class ServingWebAcl(Construct):
    """A REGIONAL web ACL for the serving ALB; `arn` goes into the Ingress annotation."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: ServingConfig) -> None:
        super().__init__(scope, construct_id)
        rules: list[dict[str, Any]] = []
        if cfg.front_door.route == "cloudfront" and cfg.allowed_cidrs:
            allowed = wafv2.CfnIPSet(
                self,
                "AllowedCidrs",
                scope="REGIONAL",
                ip_address_version="IPV4",
                addresses=list(cfg.allowed_cidrs),
                description="ingressAllowedCidrs: the only viewers allowed through CloudFront",
            )
            rules.append(
                {
                    "name": ALLOW_LIST_RULE_NAME,
                    "action": {"block": {}},
                    "statement": {
                        "notStatement": {
                            "statement": {
                                "ipSetReferenceStatement": {
                                    "arn": allowed.attr_arn,
                                    # CloudFront appends the viewer's address last; earlier entries
                                    # come from the viewer and cannot be trusted.
                                    "ipSetForwardedIpConfig": {
                                        "headerName": FORWARDED_HEADER,
                                        "fallbackBehavior": "NO_MATCH",
                                        "position": "LAST",
                                    },
                                }
                            }
                        }
                    },
                    "visibilityConfig": _visibility(ALLOW_LIST_RULE_NAME),
                }
            )
        rules.append(
            {
                "name": RATE_RULE_NAME,
                "action": {"block": {}},
                "statement": {"rateBasedStatement": rate_statement(cfg)},
                "visibilityConfig": _visibility(RATE_RULE_NAME),
            }
        )
        for group in MANAGED_RULE_GROUPS:
            rules.append(
                {
                    "name": group,
                    "overrideAction": {"none": {}},
                    "statement": {"managedRuleGroupStatement": {"vendorName": "AWS", "name": group}},
                    "visibilityConfig": _visibility(group),
                }
            )
        for priority, rule in enumerate(rules):
            rule["priority"] = priority
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action={"allow": {}},
            rules=rules,
            visibility_config=_visibility(f"{cfg.load_balancer_name}-waf"),
            description="Serving ALB: per-client rate limit and AWS managed common / known-bad-input rules",
        )

    @property
    def arn(self) -> str:
        """The web ACL's ARN (a token)."""
        return self.web_acl.attr_arn
