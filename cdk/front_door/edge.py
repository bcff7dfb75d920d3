"""The `cloudfront` front door: CloudFront with its default certificate (https://<id>.cloudfront.net)
in front of the internal ALB, reached through a CloudFront VPC origin, so the ALB is never on the
internet ("Restrict access with VPC origins", Amazon CloudFront Developer Guide).

The ALB is created by the AWS Load Balancer Controller, so the VPC origin takes its ARN from the
stack's `AlbLookup`. CloudFront's VPC-origin network interfaces live in the VPC's subnets; the
Ingress admits the VPC's CIDR on port 80 for them (cdk/front_door/ingress.py). Nothing is cached:
every request, with its Authorization header and cookies, goes to the service (managed policies
CachingDisabled + AllViewer, which forward Authorization when caching is off).

A CloudFront Function on viewer request writes the viewer's address, as CloudFront saw it
(`event.viewer.ip`), into `VIEWER_IP_HEADER`, replacing any value the viewer sent: the WAF on the ALB
keys its rate limit and allow-list on that header, which a client cannot choose (AWS's "Add a true
client IP header" example, Amazon CloudFront Developer Guide; AllViewer forwards it to the origin).
The origin read timeout is the service's deadline plus a margin (cdk/config/front_door.py), so a
request at its deadline gets the service's JSON 504, not CloudFront's error page.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from constructs import Construct

from cdk.checkov import skip_cfn_child
from cdk.config.serving import ServingConfig

ORIGIN_HTTP_PORT: Final = 80
# Lower case: CloudFront Functions name headers in lower case.
VIEWER_IP_HEADER: Final = "x-sd-viewer-ip"
# cloudfront-js-2.0; the assignment replaces every value of the header the viewer may have sent.
VIEWER_IP_FUNCTION_CODE: Final = f"""async function handler(event) {{
  var request = event.request;
  request.headers['{VIEWER_IP_HEADER}'] = {{ value: event.viewer.ip }};
  return request;
}}
"""


def ipv6_reaches_the_service(cfg: ServingConfig) -> bool:
    """Whether CloudFront answers on IPv6: not when the allow-list names IPv4 viewers only, so that a
    dual-stack viewer on an allowed IPv4 network comes over IPv4 instead of being blocked."""
    door = cfg.front_door
    return bool(door.allowed_ipv6_cidrs) or not cfg.allowed_cidrs


class EdgeDistribution(Construct):
    """CfnVpcOrigin (the ALB by ARN) + a Distribution that redirects HTTP to HTTPS."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cfg: ServingConfig, alb_arn: str, alb_hostname: str
    ) -> None:
        super().__init__(scope, construct_id)
        vpc_origin = cloudfront.CfnVpcOrigin(
            self,
            "VpcOrigin",
            vpc_origin_endpoint_config=cloudfront.CfnVpcOrigin.VpcOriginEndpointConfigProperty(
                arn=alb_arn,
                name=f"{cfg.load_balancer_name}-alb",
                http_port=ORIGIN_HTTP_PORT,
                # Inside the VPC, over AWS's network, to an internal ALB that only listens on HTTP.
                origin_protocol_policy="http-only",
            ),
        )
        origin = origins.VpcOrigin.with_vpc_origin(
            cloudfront.VpcOrigin.from_vpc_origin_attributes(
                self, "Origin", vpc_origin_id=vpc_origin.attr_id, domain_name=alb_hostname
            ),
            domain_name=alb_hostname,
            read_timeout=Duration.seconds(cfg.front_door.origin_read_timeout_s(cfg.request_timeout_s)),
            keepalive_timeout=Duration.seconds(5),
        )
        viewer_ip = cloudfront.Function(
            self,
            "ViewerIp",
            code=cloudfront.FunctionCode.from_inline(VIEWER_IP_FUNCTION_CODE),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment=f"Writes the viewer's address into {VIEWER_IP_HEADER} for the WAF's per-client rules",
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"{cfg.load_balancer_name}: Stable Diffusion UI and API",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origin,
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=viewer_ip, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
            enable_ipv6=ipv6_reaches_the_service(cfg),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
        )
        Validations.of(self.distribution).acknowledge(
            Acknowledgment(
                id="AwsSolutions-CFR1",
                reason="The service is meant for users anywhere; sign-in, not geography, decides who may use it.",
            ),
            Acknowledgment(
                id="AwsSolutions-CFR2",
                reason="The web ACL is REGIONAL and sits on the ALB behind the VPC origin (cdk/serving/waf.py): a "
                "CLOUDFRONT-scope ACL must be created in us-east-1, outside this stack's region.",
            ),
            Acknowledgment(
                id="AwsSolutions-CFR3",
                reason="Every request CloudFront forwards is logged by the ALB access logs (ingressAccessLogs) and "
                "counted by the WAF; nothing is cached, so CloudFront logs would add no request of their own.",
            ),
            Acknowledgment(
                id="AwsSolutions-CFR4",
                reason="The no-domain front door uses CloudFront's default *.cloudfront.net certificate, whose "
                "minimum protocol CloudFront fixes; with a domain, use ingressFrontDoor=alb-https (TLS 1.2+).",
            ),
        )
        # The same three design choices, for Checkov.
        skip_cfn_child(
            self.distribution,
            {
                "CKV_AWS_68": "The web ACL is REGIONAL, on the ALB behind the VPC origin (cdk/serving/waf.py), which "
                "every request passes; a CLOUDFRONT-scope ACL must live in us-east-1, outside this stack's region.",
                "CKV_AWS_86": "Every request CloudFront forwards is in the ALB's access logs; nothing is cached, and "
                "CloudFront's standard logs need S3 ACLs, which the log bucket disables (BucketOwnerEnforced).",
                "CKV_AWS_174": "CloudFront's default *.cloudfront.net certificate fixes the minimum protocol; for TLS "
                "1.2+ only, give a domain and use ingressFrontDoor=alb-https.",
            },
        )

    @property
    def url(self) -> str:
        """https://<id>.cloudfront.net, no trailing slash."""
        return f"https://{self.distribution.distribution_domain_name}"
