"""Moving a model's files between the model store (S3) and a pod's volumes; the gateway image runs these.

    python -m model_fetch --bucket B --prefix P --dest D [--prefix P2 --dest D2 ...] \
        [--wait-marker-prefix X --timeout-s N --poll-s N]
    python -m model_fetch.publish --bucket B --prefix P --src S [--meta K=V ...]

The first brings files onto a volume before the engine starts (the LLM pods' init container and the Neuron
compile Job's, cdk/llm/workload.py and cdk/llm/compile_job.py); the second uploads a folder below a prefix,
then the completion marker (the compile Job's last step). Both are built on the image service's model store
code (app/model_store/), which the gateway image carries for them.
"""
