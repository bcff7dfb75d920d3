"""Serving HTTP: the ASGI types, the bounded protocol, the draining server, the bounded body reader and the
client-disconnect race, one each for every service."""
