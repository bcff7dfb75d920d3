"""The shared runtime: what more than one image or program runs.

Token checks, logs, metric names and publishers, the model store's layout, markers and staging, probe
paths, the settings base, the draining server, the bounded body reader and the disconnect race. The
image service (`app`), the LLM gateway (`llm_gateway`), the LLM pods' model fetch (`model_fetch`), the
LLM benchmark (`llm_bench`), the routing controller and the CDK app sit on top of it; it imports none
of them (tests/test_import_layers.py). Every service image copies it whole.
"""
