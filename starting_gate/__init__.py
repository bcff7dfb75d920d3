"""The starting gate: answers "starting, about N minutes" while no serving pod is ready, and records the demand
that scales the pool up from zero (docs/trial.md)."""
