"""Who is calling: Cognito access tokens for programs (Authorization: Bearer) and a browser sign-in
(OAuth 2.0 authorization code with PKCE through Cognito's managed login, kept in an HttpOnly cookie).

`AUTH=off` (the default, for `make run` on 127.0.0.1) serves without sign-in; the cluster sets
`AUTH=cognito` and the settings named in `common.auth.env` (cdk/serving/sign_in.py writes them); the
token check itself is `common.auth.tokens`, which the LLM gateway shares.
"""
