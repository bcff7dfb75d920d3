"""Asynchronous generation jobs: submit now (`POST /v1/jobs`), collect later (`GET /v1/jobs/{id}`).

A job's request waits in a durable queue; every serving pod takes jobs while its own batching queue
has room, runs them through the same batcher as `/v1/generate`, stores the PNG and the job's state,
and announces each finished job. Two backends: `local` (an embedded queue and store on disk, for
`make run`) and `aws` (SQS with a dead-letter queue, S3 with expiry, SNS).
"""
