"""The app's stacks."""
