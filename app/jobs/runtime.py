"""Build the jobs machinery for the configured backend and hook it into the service's lifecycle."""

from __future__ import annotations

from dataclasses import dataclass

from app.jobs.aws import S3Store, SnsNotifier, SqsQueue, aws_clients
from app.jobs.local import LocalNotifier, LocalQueue, LocalStore
from app.jobs.model import JobState
from app.jobs.ports import JobQueue, JobStore, Notifier
from app.jobs.service import JobService
from app.jobs.signing import UrlSigner
from app.jobs.worker import JobWorker
from app.service import GenerationService
from app.settings import Settings


@dataclass(frozen=True)
class Jobs:
    """The API side and the worker of one service instance."""

    service: JobService
    worker: JobWorker


def build_backend(settings: Settings) -> tuple[JobQueue, JobStore, Notifier, UrlSigner | None]:
    """(queue, store, notifier, link signer) for JOBS=local or JOBS=aws."""
    if settings.jobs == "aws":
        # Checked by Settings.
        assert settings.jobs_queue_url and settings.jobs_dead_letter_url
        assert settings.jobs_bucket and settings.jobs_topic_arn
        sqs, s3, sns = aws_clients(None)
        return (
            SqsQueue(sqs, settings.jobs_queue_url, settings.jobs_dead_letter_url),
            S3Store(s3, settings.jobs_bucket, settings.jobs_prefix),
            SnsNotifier(sns, settings.jobs_topic_arn),
            None,
        )
    root = settings.jobs_dir or settings.model_cache_dir / "jobs"
    return (
        LocalQueue(root / "queue.sqlite3", settings.jobs_queue_max_receives),
        LocalStore(root),
        LocalNotifier(root / "notifications.jsonl"),
        UrlSigner.from_file(root / "url-signing.key"),
    )


def build_jobs(settings: Settings, generation: GenerationService) -> Jobs | None:
    """The jobs of this service, or None with JOBS=off; the worker drains with the service."""
    if settings.jobs == "off":
        return None
    queue, store, notifier, signer = build_backend(settings)

    def count(state: JobState) -> None:
        if generation.metrics is not None:
            generation.metrics.job_finished(succeeded=state is JobState.SUCCEEDED)

    worker = JobWorker(settings, generation, queue, store, notifier, on_finished=count)
    generation.add_drain_hook(worker.drain)
    return Jobs(JobService(settings, generation, queue, store, signer), worker)
