"""``POST /jobs/batch``: many jobs in one request, all checked before any is stored.

The body is ``{"jobs": [{"id": ..., "payload": ..., "delay": ...}, ...]}``: each job
may have a ``delay`` (seconds) or an ``at`` (ISO 8601 with its zone), as for
``POST /jobs``. Every job is checked first (the same checks as ``POST /jobs``);
one bad job refuses the whole batch with 400, naming its place, and stores
nothing. Then they are stored as `Queue.submit_many` does, one result per job, in
order, each with the status a single ``POST /jobs`` would have answered (201,
202, 200 or 409).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from .._backend_values import AddMode, NewJob, Receipt
from .._exceptions import BackendUnavailable, DependencyNotFound, IdempotencyConflict, MemoryFull
from .._job_input import prepare
from ._jobs import (
    FULL_MESSAGE,
    JOB_FIELDS,
    BodyTooLarge,
    bad_id,
    due_fields,
    error,
    job_priority,
    read_body,
    receipt_json,
    refuse_media,
    too_large_for_memory,
    unavailable,
)
from ._json import JSONResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._queue import Queue
    from ._access import Access

__all__ = ["MAX_BATCH", "post_batch"]

MAX_BATCH: Final = 10_000
"""The most jobs one batch request may hold."""


def _checked(document: Any, queue: Queue) -> list[NewJob] | JSONResponse:
    """The jobs of a batch body, checked and encoded, or the 400 naming the first bad one."""
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or set(document) != {"jobs"}:
        return error(400, "bad_batch", 'send {"jobs": [{"id": ..., "payload": ...}, ...]}')
    if not 1 <= len(jobs) <= MAX_BATCH:
        return error(400, "bad_batch", f"send 1 to {MAX_BATCH:,} jobs per batch, not {len(jobs):,}")
    checked: list[NewJob] = []
    for place, job in enumerate(jobs):
        if not isinstance(job, dict) or "payload" not in job or set(job) - JOB_FIELDS:
            return error(
                400,
                "bad_job",
                f'job {place}: send an object with "payload", and optionally "id", "delay" or '
                '"at", "max_attempts", "handler_timeout", "task", "priority", "headers", '
                '"after", "unique_key", "debounce" and "rate_key"',
            )
        job_id = job.get("id")
        if job_id is not None and not isinstance(job_id, str):
            return error(400, "bad_id", f'job {place}: "id" must be a string')
        if job_id is not None and (why := bad_id(job_id)):
            return error(400, "bad_id", f"job {place}: {why}")
        due = due_fields(job, f"job {place}: ")
        if isinstance(due, JSONResponse):
            return due
        delay, at = due
        try:
            new = prepare(
                job["payload"],
                job_id,
                queue.max_payload,
                delay=delay,
                at=at,
                max_attempts=job.get("max_attempts"),
                handler_timeout=job.get("handler_timeout"),
                task=job.get("task"),
                priority=job_priority(job),
                headers=job.get("headers"),
                after=job.get("after"),
                unique_key=job.get("unique_key"),
                debounce=job.get("debounce"),
                rate_key=job.get("rate_key"),
            )
        except (TypeError, ValueError) as exc:
            kind = "bad_delay" if delay is not None or at is not None else "bad_job"
            return error(400, kind, f"job {place} of the batch (nothing was stored): {exc}")
        checked.append(new)
    return checked


async def post_batch(request: Request, queue: Queue, max_body: int, access: Access) -> JSONResponse:
    """Store a batch (see the module); ``{"results": [...]}`` in the jobs' order."""
    refused = refuse_media(request)
    if refused is not None:
        return refused
    try:
        body = await read_body(request, max_body)
    except BodyTooLarge:
        return error(413, "too_large", f"the body is over {max_body:,} bytes (--max-body)")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return error(400, "bad_json", f"the body is not JSON ({exc})")
    jobs = document.get("jobs") if isinstance(document, dict) else None
    as_sent = [job for job in jobs if isinstance(job, dict)] if isinstance(jobs, list) else []
    refused = access.refuse_write(request, as_sent)
    if refused is not None:
        return refused
    checked = _checked(document, queue)
    if isinstance(checked, JSONResponse):
        return checked
    try:
        results = await queue.backend.add_many(checked, AddMode.SUBMIT)  # as submit_many
    except ValueError as exc:  # a stream source refuses a due time, a sharded queue after
        kind = "bad_job" if any(job.after for job in checked) else "bad_delay"
        return error(400, kind, str(exc))
    except BackendUnavailable as exc:
        return unavailable(exc, "some jobs may be stored: send the batch again with ids")
    answers: list[dict[str, Any]] = []
    for result in results:
        if isinstance(result, IdempotencyConflict):
            answers.append(
                {
                    "status": 409,
                    "id": result.job_id,
                    "stored_hash": result.existing_hash,
                    "new_hash": result.new_hash,
                }
            )
        elif isinstance(result, DependencyNotFound):
            answers.append(
                {
                    "status": 422,
                    "id": result.child,
                    "error": "unknown_after",
                    "message": str(result),
                    "after": result.job_id,
                }
            )
        elif isinstance(result, Receipt):
            status = 200 if result.deduplicated else 201 if result.queued else 202
            answers.append({"status": status, **receipt_json(result)})
        elif isinstance(result, MemoryFull) and result.size > result.max_bytes:
            message = too_large_for_memory(result)
            answers.append({"status": 413, "error": "too_large", "message": message})
        else:  # QueueFull: a memory backend's budget (MemoryFull) is full; nothing stored
            answers.append({"status": 503, "error": "full", "message": FULL_MESSAGE})
    return JSONResponse({"results": answers})
