"""Behind CloudFront: the WAF's per-client rules key on an address the client cannot choose, the origin
waits longer than the service's deadline, and IPv6 viewers are allowed (or kept on IPv4)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cdk.config.context import ConfigError
from cdk.config.front_door import CLOUDFRONT_VPC_ORIGIN_MAX_READ_TIMEOUT_S
from cdk.config.serving import ServingConfig
from cdk.front_door.edge import VIEWER_IP_HEADER, ipv6_reaches_the_service
from cdk.front_door.waf import ALLOW_LIST_RULE_NAME, RATE_RULE_NAME, UNFORWARDED_RATE_RULE_NAME
from tests.cdk.conftest import DEFAULT_CONTEXT, resources_of

HTTPS = {
    "ingressFrontDoor": "alb-https",
    "ingressInternetFacing": True,
    "ingressDomainName": "sd.example.com",
    "ingressCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0d5e7f1a-1111-2222-3333-444455556666",
}


def the(resources):
    (only,) = resources.values()
    return only


def rules(view):
    acl = the(resources_of(view.template.to_json(), "AWS::WAFv2::WebACL"))
    return {r["Name"]: r for r in acl["Properties"]["Rules"]}


def distribution_config(view):
    return the(resources_of(view.template.to_json(), "AWS::CloudFront::Distribution"))["Properties"][
        "DistributionConfig"
    ]


def run_viewer_function(code: str, event: dict) -> dict:
    """The CloudFront Function's handler, run by Node on a viewer-request event."""
    node = shutil.which("node")
    assert node, "node is on PATH for the CDK (tests/support/pinned_node.py)"
    script = code + "\nhandler(JSON.parse(process.argv[1])).then((r) => process.stdout.write(JSON.stringify(r)));"
    done = subprocess.run([node, "-e", script, json.dumps(event)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_viewer_function_overwrites_whatever_address_the_viewer_sent(capacity_serving):
    template = capacity_serving.template.to_json()
    (logical_id, function) = next(iter(resources_of(template, "AWS::CloudFront::Function").items()))
    assert function["Properties"]["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    (association,) = distribution_config(capacity_serving)["DefaultCacheBehavior"]["FunctionAssociations"]
    assert association == {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [logical_id, "FunctionARN"]}}
    spoofed = {
        "viewer": {"ip": "198.51.100.7"},
        "request": {
            "method": "POST",
            "uri": "/v1/generate",
            "headers": {
                VIEWER_IP_HEADER: {"value": "203.0.113.9", "multiValue": [{"value": "203.0.113.9"}]},
                "x-forwarded-for": {"value": "203.0.113.9"},
            },
        },
    }
    request = run_viewer_function(function["Properties"]["FunctionCode"], spoofed)
    assert request["headers"][VIEWER_IP_HEADER] == {"value": "198.51.100.7"}
    assert request["uri"] == "/v1/generate"
    ipv6 = run_viewer_function(function["Properties"]["FunctionCode"], {**spoofed, "viewer": {"ip": "2001:db8::7"}})
    assert ipv6["headers"][VIEWER_IP_HEADER] == {"value": "2001:db8::7"}


def test_requests_without_the_viewer_header_are_rate_limited_by_source_address(capacity_serving):
    by_name = rules(capacity_serving)
    names = list(by_name)
    assert names.index(RATE_RULE_NAME) < names.index(UNFORWARDED_RATE_RULE_NAME)
    rule = by_name[UNFORWARDED_RATE_RULE_NAME]
    assert rule["Action"] == {"Block": {}}
    statement = rule["Statement"]["RateBasedStatement"]
    door = capacity_serving.config.front_door
    assert (statement["AggregateKeyType"], statement["Limit"]) == ("IP", door.waf_rate_limit)
    assert statement["EvaluationWindowSec"] == door.waf_rate_window_s
    has_header = statement["ScopeDownStatement"]["NotStatement"]["Statement"]["SizeConstraintStatement"]
    assert has_header["FieldToMatch"] == {"SingleHeader": {"Name": VIEWER_IP_HEADER}}
    assert (has_header["ComparisonOperator"], has_header["Size"]) == ("GT", 0)


def test_the_alb_https_route_counts_the_real_source_address_and_has_no_viewer_rules(serving):
    by_name = rules(serving)
    assert by_name[RATE_RULE_NAME]["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "IP"
    assert UNFORWARDED_RATE_RULE_NAME not in by_name and ALLOW_LIST_RULE_NAME not in by_name


def test_the_allow_list_admits_ipv4_and_ipv6_viewers_by_the_header_cloudfront_writes(capacity_serving):
    template = capacity_serving.template.to_json()
    sets = {
        s["Properties"]["IPAddressVersion"]: s["Properties"]["Addresses"]
        for s in resources_of(template, "AWS::WAFv2::IPSet").values()
    }
    assert sets == {
        "IPV4": list(capacity_serving.config.allowed_cidrs),
        "IPV6": list(capacity_serving.config.front_door.allowed_ipv6_cidrs),
    }
    allowed = rules(capacity_serving)[ALLOW_LIST_RULE_NAME]["Statement"]["NotStatement"]["Statement"]
    references = [s["IPSetReferenceStatement"] for s in allowed["OrStatement"]["Statements"]]
    assert len(references) == 2
    for reference in references:
        assert reference["IPSetForwardedIPConfig"] == {
            "HeaderName": VIEWER_IP_HEADER,
            "Position": "FIRST",
            "FallbackBehavior": "NO_MATCH",
        }
    assert distribution_config(capacity_serving)["IPV6Enabled"] is True


def test_an_ipv4_only_allow_list_keeps_dual_stack_viewers_on_ipv4():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT | {"ingressAllowedCidrs": ["203.0.113.0/24"]})
    assert not ipv6_reaches_the_service(cfg)
    assert ipv6_reaches_the_service(ServingConfig.from_context(DEFAULT_CONTEXT))
    both = DEFAULT_CONTEXT | {"ingressAllowedCidrs": ["203.0.113.0/24"], "ingressAllowedIpv6Cidrs": ["2001:db8::/32"]}
    assert ipv6_reaches_the_service(ServingConfig.from_context(both))


def test_cloudfront_waits_longer_than_the_service_deadline(capacity_serving):
    cfg = capacity_serving.config
    (origin,) = distribution_config(capacity_serving)["Origins"]
    read_timeout = origin["VpcOriginConfig"]["OriginReadTimeout"]
    assert read_timeout > cfg.request_timeout_s
    assert read_timeout <= cfg.front_door.cloudfront_timeout_quota_s <= CLOUDFRONT_VPC_ORIGIN_MAX_READ_TIMEOUT_S


def test_the_defaults_fit_cloudfronts_default_quota():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    assert cfg.front_door.cloudfront_timeout_quota_s == 60
    assert cfg.request_timeout_s < cfg.front_door.origin_read_timeout_s(cfg.request_timeout_s) <= 60


@pytest.mark.parametrize(
    ("values", "keys"),
    [
        (
            {"servingRequestTimeoutSeconds": 56},
            ("servingRequestTimeoutSeconds", "ingressCloudFrontTimeoutQuotaSeconds"),
        ),
        (
            {"servingRequestTimeoutSeconds": 116, "ingressCloudFrontTimeoutQuotaSeconds": 120},
            ("servingRequestTimeoutSeconds", "ingressCloudFrontTimeoutQuotaSeconds"),
        ),
        ({"ingressCloudFrontTimeoutQuotaSeconds": 180}, ("ingressCloudFrontTimeoutQuotaSeconds",)),
        ({"ingressAllowedIpv6Cidrs": ["203.0.113.0/24"]}, ("ingressAllowedIpv6Cidrs",)),
        ({"ingressAllowedIpv6Cidrs": ["2001:db8::1/32"]}, ("ingressAllowedIpv6Cidrs",)),
        ({**HTTPS, "ingressAllowedIpv6Cidrs": ["2001:db8::/32"]}, ("ingressAllowedIpv6Cidrs", "ingressFrontDoor")),
    ],
    ids=[
        "deadline-at-the-default-quota",
        "deadline-at-the-vpc-origin-maximum",
        "quota-above-the-vpc-origin-maximum",
        "ipv4-in-the-ipv6-list",
        "host-bits-set",
        "ipv6-list-on-an-ipv4-alb",
    ],
)
def test_impossible_timeouts_and_bad_ipv6_lists_name_the_settings(values, keys):
    with pytest.raises(ConfigError) as raised:
        ServingConfig.from_context(DEFAULT_CONTEXT | values)
    for key in keys:
        assert key in str(raised.value)


def test_a_raised_quota_allows_a_longer_deadline():
    cfg = ServingConfig.from_context(
        DEFAULT_CONTEXT | {"servingRequestTimeoutSeconds": 115, "ingressCloudFrontTimeoutQuotaSeconds": 120}
    )
    assert cfg.front_door.origin_read_timeout_s(cfg.request_timeout_s) == 120
