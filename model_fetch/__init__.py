"""Bring a model's files from the model store (S3) onto a pod's volume before its engine starts.

    python -m model_fetch --bucket B --prefix P --dest D [--prefix P2 --dest D2 ...] \
        [--wait-marker-prefix X --timeout-s N --poll-s N]

The LLM pods run it as their init container (cdk/llm/workload.py). It is built on the image service's
model store code (app/model_store/download.py, marker.py), which the gateway image carries for it.
"""
