"""Platform constructs, one concept per module."""
