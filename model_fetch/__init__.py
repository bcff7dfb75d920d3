"""Moving the LLM's files between the model store and a pod's volumes (the gateway image runs these).

- `python -m model_fetch.publish`: upload a folder below a prefix, then the completion marker.
"""
