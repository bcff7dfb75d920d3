"""The regional AWS WAF web ACL in front of the service, associated with the ALB by the AWS Load
Balancer Controller (`alb.ingress.kubernetes.io/wafv2-acl-arn`; "Only Regional WAFv2 is supported",
docs/guide/ingress/annotations.md at LBC v3.2.2; the controller's policy in aws-cdk-lib 2.275,
aws-eks-v2/lib/addons/alb-iam_policy-v3.2.2.json, grants wafv2:AssociateWebACL).

Rules, in order: (cloudfront route with an allow-list) block callers outside ingressAllowedCidrs and
ingressAllowedIpv6Cidrs; block the paths of vLLM's router's unauthenticated admin routes (`llmRouter`,
ROUTER_ADMIN_PATHS: no service of ours serves them, and the Ingress routes only the OpenAI paths to the
router; this holds if a route is ever widened); a per-client rate limit (wafRateLimit per
wafRateWindowSeconds); (cloudfront route) the same limit per source address for requests that did not come
through CloudFront; AWS managed rule groups AWSManagedRulesCommonRuleSet and
AWSManagedRulesKnownBadInputsRuleSet (AWS WAF Developer Guide, "Baseline rule groups").

On the cloudfront route the ALB sees CloudFront's VPC-origin addresses, so the client is read from
`VIEWER_IP_HEADER`, which CloudFront's viewer-request function sets to the viewer's address whatever the
viewer sent (cdk/front_door/edge.py). `X-Forwarded-For` is not used: its first entry is the client's to
choose. AWS WAF does not apply a forwarded-IP statement to a request without the header (AWS WAF
Developer Guide, "Using forwarded IP addresses"), so a second rate rule counts those by source address.

The common rule set skips the paths whose bodies are prompts (`prompt_paths`, from the workloads' routes, such
as a language model's generation paths): its body rules block any body over 8 KB (SizeRestrictions_BODY,
"Baseline rule groups") and bodies that quote code or paths, which a conversation sent to a language model
routinely is. Those requests still pass the allow-list,
the rate limits and the known-bad-inputs group, need a token, and meet the gateway's own body limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from cdk.config.serving import ServingConfig
from cdk.front_door.edge import VIEWER_IP_HEADER

COMMON_RULE_SET: Final = "AWSManagedRulesCommonRuleSet"
MANAGED_RULE_GROUPS: Final = (COMMON_RULE_SET, "AWSManagedRulesKnownBadInputsRuleSet")
RATE_RULE_NAME: Final = "per-client-rate"
UNFORWARDED_RATE_RULE_NAME: Final = "per-source-rate-without-viewer-header"
ALLOW_LIST_RULE_NAME: Final = "outside-allow-list"
# vLLM's router's routes besides the OpenAI ones (cdk/llm/router.py), on the same port with no authentication: the
# strings of the 0.1.17 wheel's vllm_router_rs.abi3.so and the answers of a running router (GET /list_workers,
# /workers, /get_loads are 200).
ROUTER_ADMIN_PATHS: Final = (
    "/add_worker",
    "/remove_worker",
    "/list_workers",
    "/workers",
    "/get_loads",
    "/flush_cache",
    "/get_model_info",
    "/get_server_info",
    "/scheduling/diagnostics",
    "/finish_session",
    "/start_profile",
    "/stop_profile",
)
ROUTER_ADMIN_RULE_NAME: Final = "router-admin-paths"


def _visibility(name: str) -> dict[str, Any]:
    return {"cloudWatchMetricsEnabled": True, "metricName": name, "sampledRequestsEnabled": True}


def rate_statement(cfg: ServingConfig) -> dict[str, Any]:
    """Count per client address: the source IP at an internet-facing ALB, the viewer's behind CloudFront."""
    door = cfg.front_door
    statement: dict[str, Any] = {
        "limit": door.waf_rate_limit,
        "evaluationWindowSec": door.waf_rate_window_s,
        "aggregateKeyType": "IP",
    }
    if door.route == "cloudfront":
        # MATCH: a malformed value (which CloudFront never writes) is counted as one client.
        statement["aggregateKeyType"] = "FORWARDED_IP"
        statement["forwardedIpConfig"] = {"headerName": VIEWER_IP_HEADER, "fallbackBehavior": "MATCH"}
    return statement


def unforwarded_rate_statement(cfg: ServingConfig) -> dict[str, Any]:
    """Requests without the viewer header (not through CloudFront) are counted by source address."""
    door = cfg.front_door
    has_viewer_header = {
        "sizeConstraintStatement": {
            # SingleHeader is untyped JSON in the L1, passed through as written: CloudFormation's key is "Name".
            "fieldToMatch": {"singleHeader": {"Name": VIEWER_IP_HEADER}},
            "comparisonOperator": "GT",
            "size": 0,
            "textTransformations": [{"priority": 0, "type": "NONE"}],
        }
    }
    return {
        "limit": door.waf_rate_limit,
        "evaluationWindowSec": door.waf_rate_window_s,
        "aggregateKeyType": "IP",
        "scopeDownStatement": {"notStatement": {"statement": has_viewer_header}},
    }


def outside_paths(paths: Sequence[str]) -> dict[str, Any]:
    """A statement that matches a request whose path is none of `paths` (exactly)."""
    matches = [
        {
            "byteMatchStatement": {
                "fieldToMatch": {"uriPath": {}},
                "positionalConstraint": "EXACTLY",
                "searchString": path,
                "textTransformations": [{"priority": 0, "type": "NONE"}],
            }
        }
        for path in paths
    ]
    inside = matches[0] if len(matches) == 1 else {"orStatement": {"statements": matches}}
    return {"notStatement": {"statement": inside}}


def starts_with_any(prefixes: Sequence[str]) -> dict[str, Any]:
    """A statement that matches a request whose path starts with one of `prefixes` (/workers/{url} too)."""
    matches = [
        {
            "byteMatchStatement": {
                "fieldToMatch": {"uriPath": {}},
                "positionalConstraint": "STARTS_WITH",
                "searchString": prefix,
                # Decoded first, so /%77orkers is /workers.
                "textTransformations": [{"priority": 0, "type": "URL_DECODE"}],
            }
        }
        for prefix in prefixes
    ]
    return matches[0] if len(matches) == 1 else {"orStatement": {"statements": matches}}


def router_admin_rule() -> dict[str, Any]:
    """Block the router's admin routes at the door, whatever the Ingress routes."""
    return {
        "name": ROUTER_ADMIN_RULE_NAME,
        "action": {"block": {}},
        "statement": starts_with_any(ROUTER_ADMIN_PATHS),
        "visibilityConfig": _visibility(ROUTER_ADMIN_RULE_NAME),
    }


def _rate_rule(name: str, statement: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "action": {"block": {}},
        "statement": {"rateBasedStatement": statement},
        "visibilityConfig": _visibility(name),
    }


def rule_count(cfg: ServingConfig) -> int:
    """How many rules `ServingWebAcl` puts in the web ACL for `cfg` (each is billed per month: cdk/costs)."""
    behind_cloudfront = cfg.front_door.route == "cloudfront"
    allow_list = behind_cloudfront and bool(cfg.allowed_cidrs or cfg.front_door.allowed_ipv6_cidrs)
    rate_rules = 2 if behind_cloudfront else 1
    return int(allow_list) + 1 + rate_rules + len(MANAGED_RULE_GROUPS)  # 1: the router's admin paths


class ServingWebAcl(Construct):
    """A REGIONAL web ACL for the serving ALB; `arn` goes into the Ingress annotation."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cfg: ServingConfig, prompt_paths: Sequence[str] = ()
    ) -> None:
        """`prompt_paths`: paths whose bodies are prompts (every workload's `Routes.prompt_paths`), which the common
        rule set does not inspect."""
        super().__init__(scope, construct_id)
        rules: list[dict[str, Any]] = []
        behind_cloudfront = cfg.front_door.route == "cloudfront"
        if behind_cloudfront and (cfg.allowed_cidrs or cfg.front_door.allowed_ipv6_cidrs):
            rules.append(self._allow_list_rule(cfg))
        rules.append(router_admin_rule())
        rules.append(_rate_rule(RATE_RULE_NAME, rate_statement(cfg)))
        if behind_cloudfront:
            rules.append(_rate_rule(UNFORWARDED_RATE_RULE_NAME, unforwarded_rate_statement(cfg)))
        for group in MANAGED_RULE_GROUPS:
            statement: dict[str, Any] = {"vendorName": "AWS", "name": group}
            if group == COMMON_RULE_SET and prompt_paths:
                statement["scopeDownStatement"] = outside_paths(prompt_paths)
            rules.append(
                {
                    "name": group,
                    "overrideAction": {"none": {}},
                    "statement": {"managedRuleGroupStatement": statement},
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

    def _allow_list_rule(self, cfg: ServingConfig) -> dict[str, Any]:
        """Block viewers outside the IPv4 and IPv6 allow-lists (one IP set per address family)."""
        families = (
            ("AllowedCidrs", "IPV4", cfg.allowed_cidrs, "ingressAllowedCidrs"),
            ("AllowedIpv6Cidrs", "IPV6", cfg.front_door.allowed_ipv6_cidrs, "ingressAllowedIpv6Cidrs"),
        )
        matches = []
        for construct_id, version, addresses, key in families:
            if not addresses:
                continue
            ip_set = wafv2.CfnIPSet(
                self,
                construct_id,
                scope="REGIONAL",
                ip_address_version=version,
                addresses=list(addresses),
                description=f"{key}: viewers allowed through CloudFront",
            )
            matches.append(
                {
                    "ipSetReferenceStatement": {
                        "arn": ip_set.attr_arn,
                        # One address, written by CloudFront; a request without it matches no set.
                        "ipSetForwardedIpConfig": {
                            "headerName": VIEWER_IP_HEADER,
                            "fallbackBehavior": "NO_MATCH",
                            "position": "FIRST",
                        },
                    }
                }
            )
        allowed = matches[0] if len(matches) == 1 else {"orStatement": {"statements": matches}}
        return {
            "name": ALLOW_LIST_RULE_NAME,
            "action": {"block": {}},
            "statement": {"notStatement": {"statement": allowed}},
            "visibilityConfig": _visibility(ALLOW_LIST_RULE_NAME),
        }

    @property
    def arn(self) -> str:
        """The web ACL's ARN (a token)."""
        return self.web_acl.attr_arn
