"""POST /v1/jobs, GET /v1/jobs/{id}, and (local backend) GET /v1/jobs/{id}/image.

The body, its bounds and the error format are those of /v1/generate; a job belongs to the caller
that submitted it (`get_caller_id`), and another caller's job answers 404 like a missing one.
"""

# No `from __future__ import annotations`: FastAPI must see the request model built at run time.
import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.datastructures import URL

from app.api.dependencies import get_caller_id
from app.api.generate import OCTET_STREAM, PNG, choose_media_type, error_response, png_content
from app.api.schemas import ErrorResponse, make_generate_request
from app.backends.base import UnsupportedRequest
from app.jobs.model import IDEMPOTENCY_KEY_PATTERN, JOB_ID_PATTERN, JobRecord, JobState
from app.jobs.ports import StoreFull, StoreUnavailable
from app.jobs.service import IdempotencyKeyReused, JobService, QueueUnavailable, SubmissionInProgress
from app.settings import Settings

IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRY_AFTER_S = "5"


class JobAccepted(BaseModel):
    """A queued job: poll `status_url` until `state` is `succeeded` or `failed`."""

    id: str
    state: JobState
    status_url: str = Field(
        description="a path on this host: behind the ALB or CloudFront the pod cannot know the scheme"
    )


class JobStatus(BaseModel):
    """Where a job stands; once `succeeded`, `image_url` fetches the PNG until `image_url_expires_in` runs out."""

    id: str
    state: JobState
    error: str | None = Field(None, description="why the job failed, or why its last attempt failed")
    attempts: int
    max_attempts: int
    seed: int
    created_at: float
    updated_at: float
    finished_at: float | None = None
    backend: str | None = None
    image_url: str | None = None
    image_url_expires_in: int | None = Field(None, description="seconds")


def get_jobs(request: Request) -> JobService:
    """The JobService this app was created with."""
    return request.app.state.jobs.service


def _not_found() -> JSONResponse:
    return error_response(404, "no such job")


def jobs_router(settings: Settings) -> APIRouter:
    """The jobs routes, with the same request model (and bounds) as /v1/generate."""
    router = APIRouter(prefix="/v1", tags=["jobs"])
    request_model = make_generate_request(settings)
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse, "description": text}
        for code, text in (
            (409, "the Idempotency-Key was used before with a different body"),
            (413, "body too large"),
            (422, "invalid input, or a shape this deployment cannot serve"),
            (503, "the job store or queue is unavailable, or a submission with this Idempotency-Key is in progress"),
            (507, "the job store is out of space (local backend); the Idempotency-Key stays usable"),
        )
    }

    @router.post("/jobs", status_code=202, response_model=JobAccepted, responses=errors)
    async def submit_job(
        body: Annotated[request_model, Body()],  # type: ignore[valid-type]
        request: Request,
        caller: Annotated[str, Depends(get_caller_id)],
        jobs: Annotated[JobService, Depends(get_jobs)],
        idempotency_key: Annotated[
            str | None,
            Header(
                alias=IDEMPOTENCY_HEADER,
                pattern=IDEMPOTENCY_KEY_PATTERN.pattern,
                description="client-chosen key: the same key and body give the same job (1-255 printable characters)",
            ),
        ] = None,
    ) -> Response:
        """Queue one generation; answers at once with the job's id and where to poll it."""
        try:
            submission = await jobs.submit(caller, body.model_dump(), idempotency_key)
        except UnsupportedRequest as exc:
            return error_response(422, str(exc), detail=exc.detail)
        except IdempotencyKeyReused:
            return error_response(409, f"this {IDEMPOTENCY_HEADER} was used with a different request body")
        except QueueUnavailable:
            return error_response(503, "the job queue is unavailable; retry later", {"Retry-After": RETRY_AFTER_S})
        except StoreFull:
            return error_response(
                507, "the job store is out of space; nothing was queued, retry later", {"Retry-After": RETRY_AFTER_S}
            )
        except StoreUnavailable:
            return error_response(
                503, "the job store is unavailable; nothing was queued, retry later", {"Retry-After": RETRY_AFTER_S}
            )
        except SubmissionInProgress:
            return error_response(
                503,
                f"an earlier submission with this {IDEMPOTENCY_HEADER} is still being queued; retry with the same key",
                {"Retry-After": "1"},
            )
        record = submission.record
        status_url = request.app.url_path_for("get_job", job_id=record.id)
        state, _ = record.visible_state()
        headers = {"Location": status_url}
        if submission.replayed:
            headers["Idempotent-Replayed"] = "true"
        accepted = JobAccepted(id=record.id, state=state, status_url=status_url)
        return JSONResponse(accepted.model_dump(mode="json"), status_code=202, headers=headers)

    @router.get("/jobs/{job_id}", response_model=JobStatus, responses={404: {"model": ErrorResponse}})
    async def get_job(
        job_id: str,
        request: Request,
        caller: Annotated[str, Depends(get_caller_id)],
        jobs: Annotated[JobService, Depends(get_jobs)],
    ) -> Response:
        """The job's state; once it succeeded, a short-lived URL of its PNG."""
        if not JOB_ID_PATTERN.fullmatch(job_id):
            return _not_found()
        record = await jobs.get(caller, job_id)
        if record is None:
            return _not_found()
        return JSONResponse(await _status(record, request, jobs, settings.public_url))

    @router.get(
        "/jobs/{job_id}/image",
        response_class=Response,
        responses={
            200: {
                "description": "the PNG; labelled application/octet-stream for a client that names only that",
                "content": png_content(),
            },
            403: {"model": ErrorResponse},
            404: {"model": ErrorResponse},
        },
    )
    async def get_job_image(
        job_id: str,
        jobs: Annotated[JobService, Depends(get_jobs)],
        accept: Annotated[str, Header(include_in_schema=False)] = "*/*",
        expires: Annotated[int, Query()] = 0,
        signature: Annotated[str, Query(max_length=128)] = "",
    ) -> Response:
        """The PNG of a finished job, through the signed link GET /v1/jobs/{id} gave, or of an Images API answer
        with `response_format: "url"` (local backend)."""
        if not JOB_ID_PATTERN.fullmatch(job_id) or jobs.signer is None:
            return _not_found()
        if not jobs.signer.valid(job_id, expires, signature):
            return error_response(
                403,
                "the image link is invalid or has expired; a job's: ask GET /v1/jobs/{id} for a new one, "
                "an Images API answer's: generate again",
            )
        png = await asyncio.to_thread(jobs.store.read_image, job_id)
        if png is None:
            return _not_found()
        # JSON is not offered here: the PNG, or the same bytes as application/octet-stream.
        media_type = OCTET_STREAM if choose_media_type(accept) == OCTET_STREAM else PNG
        return Response(png, media_type=media_type, headers={"Cache-Control": "private, max-age=60"})

    return router


async def image_link(image_id: str, request: Request, jobs: JobService, public_url: str) -> tuple[str | None, int]:
    """(a link that fetches the stored PNG `image_id` without credentials, its lifetime in seconds): the store's
    own (an S3 presigned URL), else a signed link to GET /v1/jobs/{id}/image on this service; None when
    neither exists."""
    image_url, ttl = await jobs.image_link(image_id)
    if image_url is None and jobs.signer is not None:
        expires, signature = jobs.signer.sign(image_id, ttl)
        link = request.url_for("get_job_image", job_id=image_id)
        if public_url:  # the address clients use, not the Host header this request came with
            link = URL(public_url.rstrip("/") + link.path)
        image_url = str(link.include_query_params(expires=expires, signature=signature))
    return image_url, ttl


async def _status(record: JobRecord, request: Request, jobs: JobService, public_url: str) -> dict[str, Any]:
    state, error = record.visible_state()
    image_url, ttl = None, None
    if state is JobState.SUCCEEDED:
        image_url, ttl = await image_link(record.id, request, jobs, public_url)
    status = JobStatus(
        id=record.id,
        state=state,
        error=error,
        attempts=record.attempts,
        max_attempts=record.max_attempts,
        seed=int(record.request["seed"]),
        created_at=record.created_at,
        updated_at=record.updated_at,
        finished_at=record.finished_at,
        backend=record.backend,
        image_url=image_url,
        image_url_expires_in=ttl if image_url else None,
    )
    return status.model_dump(mode="json")
