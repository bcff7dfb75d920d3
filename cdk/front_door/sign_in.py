"""Sign-in for people and tokens for programs: a Cognito user pool the stack creates.

- the user pool: no self sign-up (an administrator invites users), a strong password policy, TOTP
  MFA required; or, with authOidc*, a given OpenID Connect provider that people sign in with instead;
- a prefix domain `<authDomainPrefix>.auth.<region>.amazoncognito.com` serving managed login and the
  /oauth2/authorize, /oauth2/token and /logout endpoints;
- the UI app client: public (no secret), authorization-code grant, callback `<public url>/auth/callback`;
- a resource server `sd-api` with the scope `sd-api/generate` and a confidential app client for
  programs (client-credentials grant). Its secret stays in Cognito: never in an output or a pod;
  `aws cognito-idp describe-user-pool-client` shows it to whoever may read it (docs/serving.md).

The service verifies the access tokens of both clients itself (app/auth/), configured by the
ConfigMap `config_map()` builds; the names of its keys come from common/auth/env.py.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import Acknowledgment, Aws, Duration, SecretValue, Stack, Validations
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from cdk.config.serving import ServingConfig
from cdk.retention import data_removal_policy
from common.auth import env

CONFIG_MAP_NAME: Final = "sd-auth"
RESOURCE_SERVER_ID: Final = "sd-api"
GENERATE_SCOPE: Final = "generate"
ACCESS_TOKEN_VALIDITY: Final = Duration.hours(1)


class SignIn(Construct):
    """The user pool, its domain and the programs' client; the UI client once the public URL is known."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: ServingConfig) -> None:
        super().__init__(scope, construct_id)
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            password_policy=cognito.PasswordPolicy(
                min_length=12, require_digits=True, require_lowercase=True, require_uppercase=True, require_symbols=True
            ),
            removal_policy=data_removal_policy(cfg.model_store_retain),
        )
        Validations.of(self.user_pool).acknowledge(
            Acknowledgment(
                id="AwsSolutions-COG8",
                reason="The Plus feature plan (threat protection) is billed per active user; invited users only, "
                "strong passwords and required TOTP MFA cover the sign-in without it.",
            )
        )
        prefix = cfg.front_door.domain_prefix(cfg.load_balancer_name, Aws.ACCOUNT_ID)
        self.domain = self.user_pool.add_domain(
            "Domain", cognito_domain=cognito.CognitoDomainOptions(domain_prefix=prefix)
        )
        self.generate_scope = cognito.ResourceServerScope(
            scope_name=GENERATE_SCOPE, scope_description="Generate images with the Stable Diffusion API"
        )
        resource_server = self.user_pool.add_resource_server(
            "Api", identifier=RESOURCE_SERVER_ID, scopes=[self.generate_scope]
        )
        self.api_client = self.user_pool.add_client(
            "Programs",
            generate_secret=True,
            access_token_validity=ACCESS_TOKEN_VALIDITY,
            prevent_user_existence_errors=True,
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(client_credentials=True),
                scopes=[cognito.OAuthScope.resource_server(resource_server, self.generate_scope)],
            ),
        )
        self.ui_client: cognito.UserPoolClient | None = None
        self.identity_provider = self._federate(cfg)

    def _federate(self, cfg: ServingConfig) -> cognito.UserPoolIdentityProviderOidc | None:
        """A given OIDC provider people sign in with; its client secret is read by CloudFormation from
        Secrets Manager at deploy time (a dynamic reference), so it is never in the template."""
        oidc = cfg.front_door.oidc
        if oidc is None:
            return None
        return cognito.UserPoolIdentityProviderOidc(
            self,
            "Oidc",
            user_pool=self.user_pool,
            name=oidc.name,
            issuer_url=oidc.issuer_url,
            client_id=oidc.client_id,
            client_secret=SecretValue.secrets_manager(oidc.client_secret_name).unsafe_unwrap(),
            scopes=["openid", "email"],
            attribute_mapping=cognito.AttributeMapping(email=cognito.ProviderAttribute.other("email")),
        )

    @property
    def issuer(self) -> str:
        """The `iss` of the pool's tokens (its JWKS is at <issuer>/.well-known/jwks.json)."""
        region = Stack.of(self).region
        return f"https://cognito-idp.{region}.amazonaws.com/{self.user_pool.user_pool_id}"

    @property
    def login_url(self) -> str:
        """The user pool domain's base URL."""
        return self.domain.base_url()

    @property
    def token_url(self) -> str:
        """Where programs get tokens (client-credentials grant)."""
        return f"{self.login_url}/oauth2/token"

    def add_ui_client(self, public_url: str) -> cognito.UserPoolClient:
        """The browser sign-in's client: public (PKCE), code grant, back to `<public_url>/auth/callback`."""
        if self.identity_provider is None:
            providers = [cognito.UserPoolClientIdentityProvider.COGNITO]
        else:
            # People sign in with their own provider only; the pool keeps no passwords for them.
            providers = [cognito.UserPoolClientIdentityProvider.custom(self.identity_provider.provider_name)]
        self.ui_client = self.user_pool.add_client(
            "Browser",
            generate_secret=False,
            access_token_validity=ACCESS_TOKEN_VALIDITY,
            prevent_user_existence_errors=True,
            supported_identity_providers=providers,
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL],
                callback_urls=[public_url + env.CALLBACK_PATH],
                logout_urls=[public_url + "/"],
            ),
        )
        if self.identity_provider is not None:
            self.ui_client.node.add_dependency(self.identity_provider)
        return self.ui_client

    def config_map(self, cfg: ServingConfig, public_url: str) -> dict[str, Any]:
        """The pods' sign-in settings (identifiers and URLs only: nothing secret)."""
        if self.ui_client is None:
            raise ValueError("add_ui_client() first")
        ui = self.ui_client.user_pool_client_id
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP_NAME, "namespace": cfg.namespace},
            "data": {
                env.AUTH: "cognito",
                env.AUTH_ISSUER: self.issuer,
                env.AUTH_CLIENT_IDS: f"{ui},{self.api_client.user_pool_client_id}",
                env.AUTH_UI_CLIENT_ID: ui,
                env.AUTH_LOGIN_URL: self.login_url,
                env.PUBLIC_URL: public_url,
            },
        }
