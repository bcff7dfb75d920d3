"""Accelerator backends: one module per backend, chosen at run time by `selection`."""
