"""The model store: where weights and compiled artifacts live in S3, and the programs that fill and read it.

- `layout`: the bucket's key layout (light; the CDK app imports it at synth time).
- `download`: mirror an S3 prefix into the local cache.
- `source`: turn MODEL_ID into something diffusers can open.
- `neuron_compile`: compile once for Neuron and publish (`python -m app.model_store.neuron_compile`).

This file imports nothing, so that importing `app.model_store.layout` stays cheap.
"""
