"""Who is calling: Cognito access tokens for programs (Authorization: Bearer) and a browser sign-in
(OAuth 2.0 authorization code with PKCE through Cognito's managed login, kept in an HttpOnly cookie).

`AUTH=off` (the default, for `make run` on 127.0.0.1) serves without sign-in; the cluster sets
`AUTH=cognito` and the settings named in `app.auth.env` (cdk/serving/sign_in.py writes them).
This module imports nothing heavy: the CDK app imports `app.auth.env` at synth time.
"""
