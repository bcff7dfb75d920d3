"""The model store: where weights and compiled artifacts live in S3, and the programs that fill and read it.

- `layout`: the bucket's key layout (light; the CDK app imports it at synth time).
- `marker`: the completion marker a reader waits for and a writer puts last.
- `download` / `upload`: mirror an S3 prefix into a local folder, and a folder's files into S3.
- `stage`: stage a model's weights from the Hugging Face Hub (`python -m common.model_store.stage`).

This file imports nothing, so that importing `common.model_store.layout` stays cheap.
"""
