"""Backends: the code that loads and runs the pipeline on one kind of accelerator."""
