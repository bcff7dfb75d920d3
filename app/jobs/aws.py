"""The AWS backend: an SQS queue (with its dead-letter queue), S3 for records and images, SNS.

Clients come from boto3 with the pod's workload identity; nothing here holds credentials.
"""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from app.jobs.model import JobRecord
from app.jobs.notice import finished_notice
from app.jobs.ports import Claim, Delivery, IdempotencyConflict, StoreUnavailable

# SQS ReceiveMessage takes at most 10 messages and waits at most 20 s (SQS API reference). Parameter
# names checked against the service models of the pinned botocore (1.44.5; PutObject IfNoneMatch
# again in 1.44.8): sqs ReceiveMessage, ChangeMessageVisibility; s3 PutObject (IfNoneMatch); sns Publish.
SQS_MAX_MESSAGES = 10
SQS_MAX_WAIT_S = 20
# A dead letter being settled stays hidden this long; if settling fails it comes back after it.
DEAD_LETTER_VISIBILITY_S = 60
# A claim older than this whose record does not exist, or whose job was not queued, belongs to a
# submission that died or failed (a PutObject and a SendMessage take well under a second): a retry
# with the same key adopts its job id, or queues it.
CLAIM_STALE_S = 30.0
ENQUEUED_MARK = "queued"  # the claim's second line once the job's message was sent
_CONDITION_FAILED = ("PreconditionFailed", "ConditionalRequestConflict")


class SqsQueue:
    """One standard SQS queue and its dead-letter queue, where the redrive policy (set by the stack)
    moves a message received more than maxReceiveCount times."""

    def __init__(self, client: Any, queue_url: str, dead_letter_url: str):
        self._sqs = client
        self.url = queue_url
        self.dead_letter_url = dead_letter_url

    def send(self, job_id: str) -> None:
        """SendMessage with the job id as the body."""
        self._sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps({"job_id": job_id}))

    def receive(self, max_messages: int, wait_s: float, visibility_s: int) -> list[Delivery]:
        """ReceiveMessage (long poll) asking for the receive count, so the worker knows its last attempt."""
        response = self._sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=max(1, min(max_messages, SQS_MAX_MESSAGES)),
            WaitTimeSeconds=int(max(0, min(wait_s, SQS_MAX_WAIT_S))),
            VisibilityTimeout=visibility_s,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        deliveries = []
        for message in response.get("Messages", []):
            job_id = json.loads(message["Body"])["job_id"]
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
            deliveries.append(Delivery(job_id, message["ReceiptHandle"], count))
        return deliveries

    def extend(self, delivery: Delivery, visibility_s: int) -> None:
        """ChangeMessageVisibility: keep the job hidden while it runs, or 0 to hand it back."""
        self._sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=delivery.receipt, VisibilityTimeout=visibility_s
        )

    def delete(self, delivery: Delivery) -> None:
        """DeleteMessage once the result is stored."""
        self._sqs.delete_message(QueueUrl=self.url, ReceiptHandle=delivery.receipt)

    def dead_letters(self, max_messages: int) -> list[Delivery]:
        """ReceiveMessage on the dead-letter queue (no wait): jobs the queue gave up on."""
        response = self._sqs.receive_message(
            QueueUrl=self.dead_letter_url,
            MaxNumberOfMessages=max(1, min(max_messages, SQS_MAX_MESSAGES)),
            WaitTimeSeconds=0,
            VisibilityTimeout=DEAD_LETTER_VISIBILITY_S,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            Delivery(
                json.loads(message["Body"])["job_id"],
                message["ReceiptHandle"],
                int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
            )
            for message in response.get("Messages", [])
        ]

    def delete_dead_letter(self, delivery: Delivery) -> None:
        """DeleteMessage on the dead-letter queue once the job is settled."""
        self._sqs.delete_message(QueueUrl=self.dead_letter_url, ReceiptHandle=delivery.receipt)


class S3Store:
    """`<prefix>records/<id>.json`, `<prefix>images/<id>.png`, `<prefix>idempotency/<token>`.

    The bucket's lifecycle rule expires everything under the prefix; encryption is the bucket's
    default (SSE-KMS with the jobs key), so no call names a key.
    """

    def __init__(self, client: Any, bucket: str, prefix: str, claim_stale_s: float = CLAIM_STALE_S):
        self._s3 = client
        self.bucket = bucket
        self.prefix = prefix
        self.claim_stale_s = claim_stale_s

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}/{name}"

    def create(self, record: JobRecord, idempotency_token: str | None) -> JobRecord:
        """Claim the idempotency token with a conditional put (If-None-Match: *), then write the record.

        A claim older than `claim_stale_s` without a record is adopted: the record is written (again
        conditionally, so one retry wins) under the claim's job id. S3 failures: StoreUnavailable.
        """
        try:
            if idempotency_token is not None:
                key = self._key("idempotency", idempotency_token)
                try:
                    self._s3.put_object(Bucket=self.bucket, Key=key, Body=record.id.encode(), IfNoneMatch="*")
                except ClientError as exc:
                    # 412: someone holds the token; 409: a concurrent conditional write is in progress.
                    if exc.response["Error"]["Code"] not in _CONDITION_FAILED:
                        raise
                    return self._adopt(key, record)
            self.put(record)
            return record
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailable(f"writing the job record failed ({type(exc).__name__})") from exc

    def _adopt(self, claim_key: str, record: JobRecord) -> JobRecord:
        claim = self._read_claim(claim_key)
        if claim is None or claim.age_s < self.claim_stale_s or self.get(claim.job_id) is not None:
            raise IdempotencyConflict(claim.job_id if claim else "")
        adopted = record.model_copy(update={"id": claim.job_id})
        try:
            self._put_record(adopted, IfNoneMatch="*")
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in _CONDITION_FAILED:
                raise
            raise IdempotencyConflict(claim.job_id) from None  # another retry adopted it first
        return adopted

    def _read_claim(self, key: str) -> Claim | None:
        try:
            got = self._s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise
        lines = got["Body"].read().decode().split()
        age = time.time() - got["LastModified"].timestamp()
        return Claim(job_id=lines[0] if lines else "", enqueued=ENQUEUED_MARK in lines[1:], age_s=age)

    def claim(self, idempotency_token: str) -> Claim | None:
        """The claim object's job id, queued mark and age, or None."""
        return self._read_claim(self._key("idempotency", idempotency_token))

    def mark_enqueued(self, idempotency_token: str, job_id: str) -> None:
        """Rewrite the claim with the queued mark."""
        self._s3.put_object(
            Bucket=self.bucket,
            Key=self._key("idempotency", idempotency_token),
            Body=f"{job_id}\n{ENQUEUED_MARK}\n".encode(),
        )

    def get(self, job_id: str) -> JobRecord | None:
        """The record, or None for NoSuchKey."""
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=self._key("records", f"{job_id}.json"))["Body"].read()
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise
        return JobRecord.model_validate_json(body)

    def put(self, record: JobRecord) -> None:
        """PutObject of the record's JSON."""
        self._put_record(record)

    def _put_record(self, record: JobRecord, **conditions: str) -> None:
        self._s3.put_object(
            Bucket=self.bucket,
            Key=self._key("records", f"{record.id}.json"),
            Body=record.model_dump_json().encode(),
            ContentType="application/json",
            **conditions,
        )

    def put_image(self, job_id: str, png: bytes) -> None:
        """PutObject of the PNG."""
        self._s3.put_object(
            Bucket=self.bucket, Key=self._key("images", f"{job_id}.png"), Body=png, ContentType="image/png"
        )

    def image_url(self, job_id: str, ttl_s: int) -> str | None:
        """A presigned GetObject URL (SigV4: required for SSE-KMS objects)."""
        return self._s3.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": self._key("images", f"{job_id}.png")},
            ExpiresIn=ttl_s,
        )

    def read_image(self, job_id: str) -> bytes | None:
        """Clients fetch images from S3 directly; the service does not proxy them."""
        return None


class SnsNotifier:
    """One SNS message per finished job, with `state` and `owner` as attributes for filter policies.

    SNS cannot say whether a Publish landed before the pod died: the record's `notified` marker is
    written right after it, so a notice repeats only for a pod killed in between. Subscribers
    de-duplicate on `job_id` (standard topics deliver at least once anyway).
    """

    def __init__(self, client: Any, topic_arn: str):
        self._sns = client
        self.topic_arn = topic_arn

    def job_finished(self, record: JobRecord) -> None:
        """Publish the job's notice."""
        self._sns.publish(
            TopicArn=self.topic_arn,
            Subject=f"Stable Diffusion job {record.state.value}",
            Message=json.dumps(finished_notice(record)),
            MessageAttributes={
                "state": {"DataType": "String", "StringValue": record.state.value},
                "owner": {"DataType": "String", "StringValue": record.owner},
            },
        )


def aws_clients(region: str | None) -> tuple[Any, Any, Any]:
    """(sqs, s3, sns) boto3 clients; S3 signs with SigV4 so presigned URLs work on KMS-encrypted objects."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(region_name=region)
    s3 = session.client("s3", config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}))
    return session.client("sqs"), s3, session.client("sns")
