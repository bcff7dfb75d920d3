"""Cluster add-ons, one module each, with the IAM each one needs next to it."""
