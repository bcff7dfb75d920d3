"""The HTTP API: routers, request/response models, error handlers and middleware."""
