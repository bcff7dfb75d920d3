"""`make verify`: the first-deploy checks of docs/first-deploy.md, run against a deployed stack."""
