"""The front door: HTTPS and sign-in on both routes, the WAF and its association, and the settings
that would expose plain HTTP or skip sign-in stopping the synth (no synth for those)."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from cdk.config.context import ConfigError
from cdk.config.serving import ServingConfig
from cdk.front_door.edge import VIEWER_IP_HEADER
from cdk.front_door.sign_in import CONFIG_MAP_NAME
from cdk.front_door.waf import COMMON_RULE_SET, MANAGED_RULE_GROUPS, RATE_RULE_NAME
from cdk.llm.routes import LLM_PROMPT_PATHS
from common.auth import env
from common.image_api_paths import GENERATE_PATH, IMAGES_EDITS_PATH, IMAGES_GENERATIONS_PATH, JOBS_PATH
from tests.cdk.conftest import DEFAULT_CONTEXT, resources_of, service_deployments

LBC = "alb.ingress.kubernetes.io/"
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0d5e7f1a-1111-2222-3333-444455556666"
HTTPS = {
    "ingressFrontDoor": "alb-https",
    "ingressInternetFacing": True,
    "ingressDomainName": "sd.example.com",
    "ingressCertificateArn": CERT,
}


def _by_kind(manifests, kind):
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def test_cdk_json_defaults_to_cloudfront_an_internal_alb_and_sign_in():
    door = ServingConfig.from_context(DEFAULT_CONTEXT).front_door
    assert (door.route, door.internet_facing, door.auth) == ("cloudfront", False, "cognito")
    assert door.waf_rate_limit == DEFAULT_CONTEXT["wafRateLimit"]


@pytest.mark.parametrize(
    ("values", "keys"),
    [
        ({"ingressInternetFacing": True}, ("ingressFrontDoor", "ingressInternetFacing")),
        ({"authMode": "off"}, ("authMode", "ingressFrontDoor")),
        ({**HTTPS, "authMode": "off"}, ("authMode", "ingressInternetFacing")),
        ({**HTTPS, "ingressCertificateArn": None}, ("ingressCertificateArn", "ingressFrontDoor")),
        ({**HTTPS, "ingressDomainName": None}, ("ingressDomainName", "ingressFrontDoor")),
        ({"ingressCertificateArn": CERT}, ("ingressCertificateArn", "ingressFrontDoor")),
        ({"servingRequestTimeoutSeconds": 300}, ("servingRequestTimeoutSeconds", "ingressFrontDoor")),
        ({"ingressFrontDoor": "http"}, ("ingressFrontDoor",)),
        ({"authMode": "none"}, ("authMode",)),
        ({"wafRateLimit": 5}, ("wafRateLimit",)),
        ({"wafRateWindowSeconds": 90}, ("wafRateWindowSeconds",)),
        ({"authDomainPrefix": "my-cognito-login"}, ("authDomainPrefix",)),
        ({**HTTPS, "ingressDomainName": "Not A Domain"}, ("ingressDomainName",)),
        ({"ingressLoadBalancerName": "sd-aws"}, ("ingressLoadBalancerName", "authDomainPrefix")),
        ({"authOidcIssuer": "https://login.example.com"}, ("authOidcClientId", "authOidcIssuer")),
        (
            {"authOidcIssuer": "http://login.example.com", "authOidcClientId": "c", "authOidcClientSecretName": "s"},
            ("authOidcIssuer",),
        ),
    ],
    ids=[
        "cloudfront-with-public-alb",
        "no-sign-in-behind-cloudfront",
        "no-sign-in-on-public-https",
        "https-without-certificate",
        "https-without-domain",
        "certificate-unused-by-cloudfront",
        "timeout-past-cloudfront",
        "unknown-route",
        "unknown-auth",
        "rate-below-waf-minimum",
        "window-waf-does-not-offer",
        "reserved-word-in-prefix",
        "bad-domain",
        "reserved-word-in-derived-prefix",
        "oidc-without-client",
        "oidc-over-http",
    ],
)
def test_exposing_combinations_and_bad_values_name_the_settings(values, keys):
    with pytest.raises(ConfigError) as raised:
        ServingConfig.from_context(DEFAULT_CONTEXT | values)
    for key in keys:
        assert key in str(raised.value)


def test_sign_in_may_be_off_only_behind_an_internal_https_alb():
    door = ServingConfig.from_context(
        DEFAULT_CONTEXT | HTTPS | {"ingressInternetFacing": False, "authMode": "off"}
    ).front_door
    assert not door.exposed and door.auth == "off"


def test_the_web_acl_has_the_rate_rule_and_the_managed_rule_groups(serving, capacity_serving):
    for view, key_type in ((serving, "IP"), (capacity_serving, "FORWARDED_IP")):
        (acl,) = resources_of(view.template.to_json(), "AWS::WAFv2::WebACL").values()
        props = acl["Properties"]
        assert props["Scope"] == "REGIONAL" and props["DefaultAction"] == {"Allow": {}}
        rules = {r["Name"]: r for r in props["Rules"]}
        rate = rules[RATE_RULE_NAME]["Statement"]["RateBasedStatement"]
        assert rules[RATE_RULE_NAME]["Action"] == {"Block": {}}
        assert rate["Limit"] == view.config.front_door.waf_rate_limit
        assert rate["EvaluationWindowSec"] == view.config.front_door.waf_rate_window_s
        assert rate["AggregateKeyType"] == key_type
        for group in MANAGED_RULE_GROUPS:
            statement = rules[group]["Statement"]["ManagedRuleGroupStatement"]
            scope = statement.pop("ScopeDownStatement", None)
            assert statement == {"VendorName": "AWS", "Name": group}
            # The common rule set leaves the prompts and images alone (its body rules block any body over 8 KB and
            # bodies that quote code): a statement matching every path but the image routes' POSTs (an edit's image
            # is larger than 8 KB) and, with LLM serving, the POSTs whose bodies are prompts or texts to embed.
            if group == COMMON_RULE_SET:
                inside = scope["NotStatement"]["Statement"]
                matches = inside["OrStatement"]["Statements"] if "OrStatement" in inside else [inside]
                image_posts = {IMAGES_GENERATIONS_PATH, IMAGES_EDITS_PATH, GENERATE_PATH, JOBS_PATH}
                expected = {*image_posts, *(LLM_PROMPT_PATHS if view.llm is not None else ())}
                searched = [m["ByteMatchStatement"]["SearchString"] for m in matches]
                assert sorted(searched) == sorted(expected)
                if view.llm is not None:
                    llm_posts = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"}
                    assert llm_posts <= set(searched)
                assert {m["ByteMatchStatement"]["PositionalConstraint"] for m in matches} == {"EXACTLY"}
                assert {json.dumps(m["ByteMatchStatement"]["FieldToMatch"]) for m in matches} == {'{"UriPath": {}}'}
            else:
                assert scope is None, group
    forwarded = rules[RATE_RULE_NAME]["Statement"]["RateBasedStatement"]["ForwardedIPConfig"]
    # Not X-Forwarded-For, whose first entry the client chooses: the header CloudFront's function writes.
    assert forwarded == {"HeaderName": VIEWER_IP_HEADER, "FallbackBehavior": "MATCH"}


def test_the_images_api_reaches_the_image_service_through_the_ingress(serving, capacity_serving):
    # The image routes' `/` Prefix takes /v1/images/generations; no other workload's path (the LLM's are Exact
    # paths and the `/v1/models/` Prefix) claims it.
    for view in (serving, capacity_serving):
        paths = _by_kind(view.manifests, "Ingress")["sd"]["spec"]["rules"][0]["http"]["paths"]
        claims = [
            p
            for p in paths
            if (p["pathType"] == "Exact" and p["path"] == IMAGES_GENERATIONS_PATH)
            or (p["pathType"] == "Prefix" and IMAGES_GENERATIONS_PATH.startswith(p["path"]))
        ]
        # `/` only: with both pools, the X-Image-Pool routes first, then every pool (the one backend otherwise).
        assert {p["path"] for p in claims} == {"/"}, claims
        assert claims[-1]["backend"] == [p for p in paths if p["path"] == "/"][-1]["backend"]


def test_the_ingress_associates_the_web_acl(serving, capacity_serving):
    for view in (serving, capacity_serving):
        (logical,) = resources_of(view.template.to_json(), "AWS::WAFv2::WebACL")
        annotations = _by_kind(view.manifests, "Ingress")["sd"]["metadata"]["annotations"]
        assert annotations[LBC + "wafv2-acl-arn"] == f"{logical}.Arn"


def test_https_route_serves_tls_redirects_http_and_has_no_cloudfront(serving):
    annotations = _by_kind(serving.manifests, "Ingress")["sd"]["metadata"]["annotations"]
    assert annotations[LBC + "scheme"] == "internet-facing"
    assert json.loads(annotations[LBC + "listen-ports"]) == [{"HTTP": 80}, {"HTTPS": 443}]
    assert annotations[LBC + "ssl-redirect"] == "443"
    assert annotations[LBC + "certificate-arn"] == serving.config.front_door.certificate_arn
    serving.template.resource_count_is("AWS::CloudFront::Distribution", 0)
    serving.template.has_output("ServiceUrl", {"Value": "https://sd.example.com/"})
    serving.template.has_output("LoadBalancerHostname", {"Value": {"Fn::GetAtt": [Match.any_value(), "Value"]}})
    serving.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {"CallbackURLs": ["https://sd.example.com/auth/callback"], "GenerateSecret": False},
    )


def test_cloudfront_route_keeps_the_alb_internal_and_redirects_viewers_to_https(capacity_serving):
    annotations = _by_kind(capacity_serving.manifests, "Ingress")["sd"]["metadata"]["annotations"]
    assert annotations[LBC + "scheme"] == "internal"
    assert json.loads(annotations[LBC + "listen-ports"]) == [{"HTTP": 80}]
    assert annotations[LBC + "inbound-cidrs"] != "0.0.0.0/0"  # the VPC's CIDR: CloudFront's VPC-origin ENIs
    template = capacity_serving.template
    template.has_resource_properties(
        "AWS::CloudFront::VpcOrigin",
        {
            "VpcOriginEndpointConfig": {
                "Arn": {"Fn::GetAtt": [Match.string_like_regexp("AlbLookup"), Match.any_value()]}
            }
        },
    )
    template.has_resource_properties(
        "AWS::CloudFront::Distribution",
        {
            "DistributionConfig": Match.object_like(
                {
                    "DefaultCacheBehavior": Match.object_like({"ViewerProtocolPolicy": "redirect-to-https"}),
                    "Origins": [
                        Match.object_like(
                            {
                                "VpcOriginConfig": Match.object_like(
                                    {"OriginReadTimeout": capacity_serving.config.request_timeout_s + 5}
                                )
                            }
                        )
                    ],
                }
            )
        },
    )
    (distribution,) = resources_of(template.to_json(), "AWS::CloudFront::Distribution")
    url = template.to_json()["Outputs"]["ServiceUrl"]["Value"]
    assert url == {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/"]]}


def test_programs_get_client_credentials_and_no_secret_leaves_cognito(serving, capacity_serving):
    for view in (serving, capacity_serving):
        template = view.template.to_json()
        clients = resources_of(template, "AWS::Cognito::UserPoolClient").values()
        flows = sorted(tuple(c["Properties"]["AllowedOAuthFlows"]) for c in clients)
        assert flows == [("client_credentials",), ("code",)]
        view.template.resource_count_is("AWS::Cognito::UserPoolResourceServer", 1)
        view.template.has_resource_properties(
            "AWS::Cognito::UserPool",
            {"AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True}, "MfaConfiguration": "ON"},
        )
        dumped = json.dumps({"Outputs": template["Outputs"], "Manifests": view.manifests})
        assert "ClientSecret" not in dumped


def test_pods_read_their_sign_in_settings_from_the_config_map(serving):
    config = _by_kind(serving.manifests, "ConfigMap")[CONFIG_MAP_NAME]
    assert set(config["data"]) == {
        env.AUTH,
        env.AUTH_ISSUER,
        env.AUTH_CLIENT_IDS,
        env.AUTH_UI_CLIENT_ID,
        env.AUTH_LOGIN_URL,
        env.PUBLIC_URL,
    }
    assert config["data"][env.AUTH] == "cognito"
    assert config["data"][env.PUBLIC_URL] == "https://sd.example.com"
    assert config["data"][env.AUTH_UI_CLIENT_ID] in config["data"][env.AUTH_CLIENT_IDS].split(",")
    for deployment in service_deployments(serving.manifests):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert {"configMapRef": {"name": CONFIG_MAP_NAME}} in container["envFrom"]


def test_a_given_oidc_provider_signs_people_in_and_its_secret_stays_in_secrets_manager(serving, capacity_serving):
    oidc = serving.config.front_door.oidc
    ((logical, provider),) = resources_of(serving.template.to_json(), "AWS::Cognito::UserPoolIdentityProvider").items()
    props = provider["Properties"]
    assert props["ProviderType"] == "OIDC" and props["ProviderName"] == oidc.name
    assert props["ProviderDetails"]["oidc_issuer"] == oidc.issuer_url
    secret = props["ProviderDetails"]["client_secret"]
    assert secret == f"{{{{resolve:secretsmanager:{oidc.client_secret_name}:SecretString:::}}}}"
    serving.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {"AllowedOAuthFlows": ["code"], "SupportedIdentityProviders": [{"Ref": logical}]},  # Ref: its name
    )
    # Without authOidc*, people sign in with the user pool itself.
    capacity_serving.template.resource_count_is("AWS::Cognito::UserPoolIdentityProvider", 0)
    capacity_serving.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient", {"AllowedOAuthFlows": ["code"], "SupportedIdentityProviders": ["COGNITO"]}
    )
