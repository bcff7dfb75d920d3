"""The image service's side of the model store (the shared layout, markers and transfers are in
`common.model_store`).

- `source`: turn MODEL_ID into something diffusers can open.
- `neuron_compile`: compile once for Neuron and publish (`python -m app.model_store.neuron_compile`).
"""
