"""The AWS path of jobs against moto (SQS with a redrive policy, S3, SNS delivering to an SQS queue).

The worker runs for real on an event loop with a started GenerationService and a stand-in backend;
only AWS is simulated. "Killed" workers are modelled as SQS sees them: a consumer that received a
message and then never called anything again.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from moto import mock_aws
from PIL import Image

from app.jobs.aws import S3Store, SnsNotifier, SqsQueue
from app.jobs.model import JobRecord, JobState, idempotency_token, new_job_id, request_fingerprint
from app.jobs.service import JobService, SubmissionInProgress
from app.jobs.worker import JobWorker
from app.service import GenerationService
from app.settings import load_settings
from tests.app.fakes import FakeBackend
from tests.app.live_server import TEST_SETTINGS

# Pods of the service (generation and job workers) run in-process against moto, through no starter the tiers
# know, and wait out real visibility timeouts: about a minute in all.
pytestmark = pytest.mark.server

REGION = "us-east-1"
BUCKET = "sd-jobs-test"
MAX_RECEIVES = 2  # attempts, counted by the service
QUEUE_MAX_RECEIVES = 4  # the redrive policy's maxReceiveCount: deliveries, hand-backs included
CLAIM_STALE_S = 8.0  # below the store's 30 s, to keep the tests short (S3 dates have whole seconds)


@dataclass
class Aws:
    sqs: Any
    s3: Any
    sns: Any
    queue_url: str
    dlq_url: str
    topic_arn: str
    inbox_url: str  # an SQS queue subscribed to the topic: what a user's endpoint would receive

    def notices(self) -> list[dict[str, Any]]:
        """Every SNS message delivered to the inbox so far (consumed)."""
        found = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.inbox_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            if not got.get("Messages"):
                return found
            for message in got["Messages"]:
                envelope = json.loads(message["Body"])
                found.append({"notice": json.loads(envelope["Message"]), "attributes": envelope["MessageAttributes"]})
                self.sqs.delete_message(QueueUrl=self.inbox_url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture
def aws(monkeypatch) -> Iterator[Aws]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION, config=Config(signature_version="s3v4"))
        sns = boto3.client("sns", region_name=REGION)
        dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": QUEUE_MAX_RECEIVES})
        queue_url = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": redrive})["QueueUrl"]
        s3.create_bucket(Bucket=BUCKET)
        topic_arn = sns.create_topic(Name="jobs-finished")["TopicArn"]
        inbox_url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
        inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=inbox_arn)
        yield Aws(sqs, s3, sns, queue_url, dlq_url, topic_arn, inbox_url)


def settings(aws: Aws, **overrides: object):
    return load_settings(
        **{
            **TEST_SETTINGS,
            "jobs": "aws",
            "jobs_queue_url": aws.queue_url,
            "jobs_dead_letter_url": aws.dlq_url,
            "jobs_bucket": BUCKET,
            "jobs_topic_arn": aws.topic_arn,
            "jobs_max_receives": MAX_RECEIVES,
            "jobs_queue_max_receives": QUEUE_MAX_RECEIVES,
            "jobs_visibility_s": 10,
            "jobs_poll_s": 1.0,
            **overrides,
        }
    )


@dataclass
class Pod:
    """One serving pod's job side: the generation service, its backend, the job service and worker."""

    generation: GenerationService
    backend: FakeBackend
    jobs: JobService
    worker: JobWorker
    store: S3Store
    queue: SqsQueue

    async def stop(self) -> None:
        await self.worker.stop()
        await self.generation.stop()


async def start_pod(aws: Aws, backend: FakeBackend | None = None, visibility_s: int | None = None, **overrides) -> Pod:
    cfg = settings(aws, **overrides)
    if visibility_s is not None:  # below the settings' 10 s floor, to keep the test short
        cfg = cfg.model_copy(update={"jobs_visibility_s": visibility_s})
    backend = backend or FakeBackend()
    generation = GenerationService(cfg, lambda _s: backend)
    await generation.start()
    queue = SqsQueue(aws.sqs, aws.queue_url, aws.dlq_url)
    store = S3Store(aws.s3, BUCKET, cfg.jobs_prefix, claim_stale_s=CLAIM_STALE_S)
    notifier = SnsNotifier(aws.sns, aws.topic_arn)
    worker = JobWorker(cfg, generation, queue, store, notifier)
    generation.add_drain_hook(worker.drain)
    return Pod(generation, backend, JobService(cfg, generation, queue, store), worker, store, queue)


async def settled(store: S3Store, job_id: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        record = await asyncio.to_thread(store.get, job_id)
        if record.state in (JobState.SUCCEEDED, JobState.FAILED) and record.notified:
            return record
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} is still {record.state}")
        await asyncio.sleep(0.05)


def runs(backend: FakeBackend, seed: int) -> int:
    return sum(1 for batch in backend.batches for p in batch if p.seed == seed)


def queue_counts(aws: Aws, url: str) -> tuple[int, int]:
    attrs = aws.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_submit_to_result_with_a_working_presigned_url_and_one_notice(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        submission = await pod.jobs.submit("alice", {"prompt": "a red fox", "seed": 5}, None)
        pod.worker.start()
        record = await settled(pod.store, submission.record.id)
        url, ttl = await pod.jobs.image_link(record.id)
        await pod.stop()

        assert record.state is JobState.SUCCEEDED and record.attempts == 1 and record.backend == "cpu"
        assert runs(pod.backend, 5) == 1
        assert queue_counts(aws, aws.queue_url) == (0, 0)  # deleted once stored
        assert "X-Amz-Signature=" in url and f"X-Amz-Expires={ttl}" in url
        image = requests.get(url, timeout=10)
        assert image.status_code == 200
        assert Image.open(io.BytesIO(image.content)).size == (64, 64)
        notices = aws.notices()
        assert [n["notice"]["job_id"] for n in notices] == [record.id]
        assert notices[0]["notice"]["state"] == "succeeded"
        assert notices[0]["attributes"]["state"]["Value"] == "succeeded"
        assert notices[0]["attributes"]["owner"]["Value"] == "alice"

    asyncio.run(scenario())


def test_a_job_whose_worker_died_comes_back_after_its_visibility_timeout_and_completes_once(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        submission = await pod.jobs.submit("alice", {"prompt": "survivor", "seed": 77}, None)
        # The first worker receives the job, marks it running, and is killed before anything else.
        (taken,) = await asyncio.to_thread(pod.queue.receive, 1, 1, 2)
        running = submission.record.touch(state=JobState.RUNNING, attempts=1, lease_until=time.time() + 2)
        await asyncio.to_thread(pod.store.put, running)
        assert running.visible_state()[0] is JobState.RUNNING
        pod.worker.start()  # another pod's worker: nothing to receive until the timeout passes
        await asyncio.sleep(1.0)
        assert runs(pod.backend, 77) == 0
        record = await settled(pod.store, submission.record.id)
        await asyncio.sleep(1.5)  # time for a duplicate, if there were one
        await pod.stop()

        assert taken.job_id == record.id
        assert record.state is JobState.SUCCEEDED and record.attempts == 2
        assert runs(pod.backend, 77) == 1
        assert [n["notice"]["job_id"] for n in aws.notices()] == [record.id]
        assert queue_counts(aws, aws.queue_url) == (0, 0)
        assert queue_counts(aws, aws.dlq_url) == (0, 0)

    asyncio.run(scenario())


def test_a_poison_job_is_failed_with_its_error_announced_once_and_its_message_deleted(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        submission = await pod.jobs.submit("alice", {"prompt": "explode", "seed": 3}, None)
        pod.worker.start()
        record = await settled(pod.store, submission.record.id)
        await asyncio.sleep(1.5)  # time for a duplicate, if there were one
        await pod.stop()

        assert record.state is JobState.FAILED and record.attempts == MAX_RECEIVES
        assert "generation failed (error id " in record.error
        assert f"gave up after {MAX_RECEIVES} attempts" in record.error
        assert runs(pod.backend, 3) == MAX_RECEIVES
        # The service decided: the message is gone, nothing waits in either queue.
        assert queue_counts(aws, aws.queue_url) == (0, 0)
        assert queue_counts(aws, aws.dlq_url) == (0, 0)
        notices = aws.notices()
        assert [(n["notice"]["job_id"], n["notice"]["state"]) for n in notices] == [(record.id, "failed")]
        assert notices[0]["notice"]["error"] == record.error

    asyncio.run(scenario())


def test_hand_backs_at_shutdown_do_not_use_up_attempts(aws):
    async def scenario() -> None:
        submitted = None
        for _ in range(MAX_RECEIVES + 1):  # more shutdowns during the job's life than it has attempts
            pod = await start_pod(aws)
            pod.backend.release.clear()  # the pipeline hangs: the job cannot finish within the grace
            if submitted is None:
                submitted = (await pod.jobs.submit("alice", {"prompt": "long", "seed": 23}, None)).record
            pod.worker.start()
            while pod.worker.held == 0:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            await pod.generation.drain(2.5)
            handed_back = await asyncio.to_thread(pod.store.get, submitted.id)
            pod.backend.release.set()
            await pod.stop()
            assert handed_back.state is JobState.QUEUED and handed_back.attempts == 0
        pod = await start_pod(aws)  # a pod that keeps running
        pod.worker.start()
        record = await settled(pod.store, submitted.id)
        await pod.stop()

        assert record.state is JobState.SUCCEEDED and record.attempts == 1
        assert [n["notice"]["state"] for n in aws.notices()] == ["succeeded"]
        assert queue_counts(aws, aws.dlq_url) == (0, 0)

    asyncio.run(scenario())


def test_a_job_the_queue_gives_up_on_is_failed_and_announced(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        submission = await pod.jobs.submit("alice", {"prompt": "unlucky", "seed": 41}, None)
        # Consumers that die right after receiving, QUEUE_MAX_RECEIVES times: the redrive policy
        # moves the message to the dead-letter queue on the next receive.
        for _ in range(QUEUE_MAX_RECEIVES):
            (taken,) = await asyncio.to_thread(pod.queue.receive, 1, 2, 1)
            assert taken.job_id == submission.record.id
            await asyncio.sleep(1.1)
        assert await asyncio.to_thread(pod.queue.receive, 1, 0, 1) == []
        assert queue_counts(aws, aws.dlq_url) == (1, 0)
        pod.worker.start()
        record = await settled(pod.store, submission.record.id)
        await asyncio.sleep(1.5)  # the sweep deletes the dead letter once the job is settled
        await pod.stop()

        assert record.state is JobState.FAILED and record.attempts == 0
        assert f"gave up on it after {QUEUE_MAX_RECEIVES} deliveries" in record.error
        assert runs(pod.backend, 41) == 0
        notices = aws.notices()
        assert [(n["notice"]["job_id"], n["notice"]["state"]) for n in notices] == [(record.id, "failed")]
        assert queue_counts(aws, aws.dlq_url) == (0, 0)

    asyncio.run(scenario())


def test_an_idempotency_key_gives_one_job_and_one_message(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        body = {"prompt": "once", "seed": 11}
        first, again = await asyncio.gather(
            pod.jobs.submit("alice", dict(body), "batch-7"), pod.jobs.submit("alice", dict(body), "batch-7")
        )
        assert first.record.id == again.record.id
        assert sorted([first.replayed, again.replayed]) == [False, True]
        assert queue_counts(aws, aws.queue_url) == (1, 0)
        pod.worker.start()
        record = await settled(pod.store, first.record.id)
        await pod.stop()
        assert record.state is JobState.SUCCEEDED
        assert runs(pod.backend, 11) == 1

    asyncio.run(scenario())


def test_on_sigterm_a_pod_hands_back_the_job_it_cannot_finish(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        pod.backend.release.clear()  # the pipeline hangs: the job cannot finish within the grace
        submission = await pod.jobs.submit("alice", {"prompt": "long", "seed": 21}, None)
        pod.worker.start()
        while pod.worker.held == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        await pod.generation.drain(3.0)
        record = await asyncio.to_thread(pod.store.get, submission.record.id)
        pod.backend.release.set()
        # Visible again at once (no waiting for the 10 s timeout), for another pod.
        again = await asyncio.to_thread(pod.queue.receive, 1, 1, 10)
        await pod.stop()

        assert pod.worker.held == 0
        assert record.state is JobState.QUEUED
        assert [d.job_id for d in again] == [submission.record.id]

    asyncio.run(scenario())


def test_a_job_longer_than_its_visibility_timeout_stays_hidden_and_runs_once(aws):
    async def scenario() -> None:
        slow = FakeBackend(delay_s=1.0)  # 8 steps: about 8 s, the visibility timeout is 3 s
        first = await start_pod(aws, backend=slow, visibility_s=3)
        second = await start_pod(aws, visibility_s=3)  # an idle pod polling the same queue
        submission = await first.jobs.submit("alice", {"prompt": "long", "steps": 8, "seed": 31}, None)
        first.worker.start()
        while first.worker.held == 0:
            await asyncio.sleep(0.05)
        second.worker.start()
        record = await settled(first.store, submission.record.id, timeout_s=60)
        await first.stop()
        await second.stop()

        assert record.state is JobState.SUCCEEDED and record.attempts == 1
        assert runs(slow, 31) == 1 and runs(second.backend, 31) == 0
        assert len(aws.notices()) == 1

    asyncio.run(scenario())


def stranded_record(body: dict[str, Any]) -> JobRecord:
    """The record a submission writes for `body` before it queues the job."""
    now = time.time()
    return JobRecord(
        id=new_job_id(),
        owner="alice",
        state=JobState.QUEUED,
        request=body,
        fingerprint=request_fingerprint(body),
        max_attempts=MAX_RECEIVES,
        created_at=now,
        updated_at=now,
    )


def test_a_retry_queues_the_job_of_a_submission_that_died_before_queueing_it(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        body = {"prompt": "stranded", "seed": 51}
        token = idempotency_token("alice", "batch-9")
        stranded = stranded_record(body)
        await asyncio.to_thread(pod.store.create, stranded, token)  # the submission died here
        with pytest.raises(SubmissionInProgress):  # a fresh claim: its submitter may still be queueing
            await pod.jobs.submit("alice", dict(body), "batch-9")
        await asyncio.sleep(CLAIM_STALE_S + 1)
        retry = await pod.jobs.submit("alice", dict(body), "batch-9")
        assert retry.replayed and retry.record.id == stranded.id
        assert queue_counts(aws, aws.queue_url) == (1, 0)
        again = await pod.jobs.submit("alice", dict(body), "batch-9")  # now marked queued: no second message
        assert again.replayed and queue_counts(aws, aws.queue_url) == (1, 0)
        pod.worker.start()
        record = await settled(pod.store, stranded.id)
        await pod.stop()
        assert record.state is JobState.SUCCEEDED and runs(pod.backend, 51) == 1

    asyncio.run(scenario())


def test_a_retry_adopts_a_claim_whose_record_was_never_written(aws):
    async def scenario() -> None:
        pod = await start_pod(aws)
        orphan = new_job_id()
        claim_key = f"{pod.store.prefix}idempotency/{idempotency_token('alice', 'batch-10')}"
        aws.s3.put_object(Bucket=BUCKET, Key=claim_key, Body=orphan.encode())  # the submission died here
        await asyncio.sleep(CLAIM_STALE_S + 1)
        retry = await pod.jobs.submit("alice", {"prompt": "orphan", "seed": 52}, "batch-10")
        assert retry.record.id == orphan and not retry.replayed
        pod.worker.start()
        record = await settled(pod.store, orphan)
        await pod.stop()
        assert record.state is JobState.SUCCEEDED and runs(pod.backend, 52) == 1

    asyncio.run(scenario())
