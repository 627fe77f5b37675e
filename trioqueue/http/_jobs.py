"""``POST /jobs`` and ``GET /jobs/{id}``: seed 003's ingest, and a job's record.

An event is stored with `Queue.submit`: it never waits for room and never fails
for a full queue. A full queue stores it unscheduled (``queued: false``, 202),
and the sweeper schedules it when room frees: it exists, and is scheduled later.
An event with a ``delay`` (seconds) or an ``at`` (ISO 8601 with its zone) waits
for its due time (``scheduled: true``, 202), then goes on the ready queue; one with
``after`` (job ids) waits for those jobs to complete (``deferred: true``, 202).
"""

from __future__ import annotations

import datetime
import json
import logging
from contextlib import aclosing, suppress
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import attrs

from .._exceptions import (
    BackendUnavailable,
    DependencyNotFound,
    IdempotencyConflict,
    MemoryFull,
    QueueFull,
)
from ._json import JSONResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._backend_values import Receipt
    from .._queue import Queue
    from ._access import Access

__all__ = [
    "FULL_MESSAGE",
    "JOB_FIELDS",
    "BodyTooLarge",
    "error",
    "get_job",
    "job_priority",
    "post_job",
    "read_body",
    "refuse_media",
    "too_large_for_memory",
]

logger = logging.getLogger("trioqueue.http")

RETRY_AFTER: Final = "1"  # seconds a client waits before it sends again after a 503
FULL_MESSAGE: Final = (
    "the service holds as many jobs as its memory allows (--max-memory); nothing was "
    "stored: send it again after Retry-After seconds, once workers have made room"
)
"""What a 503 ``full`` says: the service's own words, not the library's (`MemoryFull`)."""
JOB_FIELDS: Final = frozenset(
    {
        "id",
        "payload",
        "delay",
        "at",
        "max_attempts",
        "handler_timeout",
        "task",
        "priority",
        "headers",
        "after",
        "unique_key",
        "debounce",
        "rate_key",
    }
)
"""What one job of ``POST /jobs`` or ``POST /jobs/batch`` may hold."""


def receipt_json(receipt: Receipt) -> dict[str, Any]:
    """What an enqueue did, as JSON.

    With the state of a job it added; that of a job found already there is in its
    record, for a client that may read it.
    """
    answer: dict[str, Any] = {
        "id": receipt.id,
        "deduplicated": receipt.deduplicated,
        "queued": receipt.queued,
        "scheduled": receipt.scheduled,
        "deferred": receipt.deferred,
    }
    if not receipt.deduplicated:
        answer["state"] = receipt.state.value
    return answer


class BodyTooLarge(Exception):
    """The request body is over the service's limit."""


def error(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    """A JSON error response: ``{"error": kind, "message": ...}`` and *extra* fields."""
    headers = {"Retry-After": RETRY_AFTER} if status == 503 else None
    return JSONResponse({"error": kind, "message": message, **extra}, status, headers=headers)


def unavailable(exc: BackendUnavailable, then: str) -> JSONResponse:
    """503 for a backend that cannot be reached: what to do, never where the backend is.

    The backend's own message (its host, port, user, certificate paths) goes to the
    service's log, for its operator; the client learns only that it may retry.
    """
    # where and why, without the advice a library user gets ("pools retry by themselves")
    logger.warning("answered 503: the backend at %s: %s", exc.where, exc.detail)
    return error(503, "unavailable", f"the queue's backend cannot be reached now; {then}")


def too_large_for_memory(exc: MemoryFull) -> str:
    """What a 413 says of a job larger than the service's whole memory budget."""
    return (
        f"the job takes {exc.size:,} bytes, more than all of --max-memory "
        f"({exc.max_bytes:,} bytes) holds: it can never be stored; send a smaller one, "
        "or raise --max-memory"
    )


def bad_id(job_id: str) -> str | None:
    """Why *job_id* cannot travel in a URL (``GET /jobs/ID``), or None if it can."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in job_id):
        return (
            f"the id {job_id!r} holds a control character (a line feed, a tab, ...), which "
            "no URL of this service can carry: use printable characters"
        )
    return None


def refuse_media(request: Request) -> JSONResponse | None:
    """The 415 for a body that is not declared JSON; None if it is.

    A web page can make a browser post a form, ``text/plain`` or multipart body
    to any site without asking it first; a JSON body needs the site's consent
    (CORS), which this service never gives. So only JSON is taken.
    """
    declared = request.headers.get("content-type", "")
    media = declared.partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    if kind == "application" and (subtype == "json" or subtype.endswith("+json")):
        return None
    return error(
        415,
        "not_json",
        f"the body is declared {declared or 'as nothing'!r}; send JSON with "
        "Content-Type: application/json",
    )


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused past *limit* bytes (by its length header or as it comes).

    Raises:
        BodyTooLarge: The body is longer than *limit*.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    async with aclosing(request.stream()) as chunks:  # closed when cut short too
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                raise BodyTooLarge
    return bytes(body)


@attrs.frozen
class _Fields:
    """What a ``POST /jobs`` body asks for."""

    payload: Any
    id: str | None
    delay: float | None
    at: datetime.datetime | None
    max_attempts: Any
    handler_timeout: Any
    task: Any
    priority: Any
    headers: Any
    after: Any
    unique_key: Any
    debounce: Any
    rate_key: Any


def due_fields(
    document: dict[str, Any], where: str = ""
) -> tuple[float | None, datetime.datetime | None] | JSONResponse:
    """A job's ``delay`` and ``at``, their types checked, or the 400 that says what is wrong.

    The queue checks their values. *where* starts the message (``"job 3: "``).
    """
    delay, at = document.get("delay"), document.get("at")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int | float)):
        return error(400, "bad_delay", f'{where}"delay" is seconds (a number), not {delay!r}')
    if at is not None:
        with suppress(ValueError):
            at = datetime.datetime.fromisoformat(at) if isinstance(at, str) else at
        if not isinstance(at, datetime.datetime):
            return error(
                400,
                "bad_delay",
                f'{where}"at" is an ISO 8601 time with its zone, e.g. '
                f'"2026-12-24T18:00:00+01:00", not {document["at"]!r}',
            )
    return delay, at


def job_priority(document: dict[str, Any]) -> Any:
    """A job's ``priority``: 0 when absent or null; the queue checks the rest."""
    priority = document.get("priority")
    return 0 if priority is None else priority


def _job_fields(body: bytes, header_id: str | None) -> _Fields | JSONResponse:
    """The job a ``POST /jobs`` body names, or the 400 that says what is wrong."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return error(400, "bad_json", f'the body is not JSON ({exc}); send {{"payload": ...}}')
    if not isinstance(document, dict) or "payload" not in document:
        return error(
            400,
            "bad_job",
            'send a JSON object with a "payload" (any JSON value) and optionally an "id"',
        )
    unknown = sorted(set(document) - JOB_FIELDS)
    if unknown:
        return error(
            400,
            "bad_job",
            f'unknown fields {unknown}: send "payload", and optionally "id", "delay" or "at", '
            '"max_attempts", "handler_timeout", "task", "priority", "headers", "after", '
            '"unique_key", "debounce" and "rate_key"',
        )
    due = due_fields(document)
    if isinstance(due, JSONResponse):
        return due
    delay, at = due
    job_id = document.get("id")
    if job_id is not None and not isinstance(job_id, str):
        return error(400, "bad_id", f'"id" must be a string, not {type(job_id).__name__}')
    if header_id is not None:
        if job_id is not None and job_id != header_id:
            return error(
                400,
                "bad_id",
                f"the Idempotency-Key header ({header_id!r}) and the body's id ({job_id!r}) "
                "differ: give one of them",
            )
        job_id = header_id
    if job_id is not None and (why := bad_id(job_id)):
        return error(400, "bad_id", why)
    return _Fields(
        document["payload"],
        job_id,
        delay,
        at,
        document.get("max_attempts"),
        document.get("handler_timeout"),
        document.get("task"),
        job_priority(document),
        document.get("headers"),
        document.get("after"),
        document.get("unique_key"),
        document.get("debounce"),
        document.get("rate_key"),
    )


async def post_job(request: Request, queue: Queue, max_body: int, access: Access) -> JSONResponse:
    """Accept one job (see the module); every status is in the OpenAPI document."""
    refused = refuse_media(request)
    if refused is not None:
        return refused
    try:
        body = await read_body(request, max_body)
    except BodyTooLarge:
        return error(413, "too_large", f"the body is over {max_body:,} bytes (--max-body)")
    fields = _job_fields(body, request.headers.get("idempotency-key"))
    if isinstance(fields, JSONResponse):
        return access.refuse_write(request, ()) or fields  # a guarded service says no more
    refused = access.refuse_write(request, [attrs.asdict(fields, recurse=False)])
    if refused is not None:
        return refused
    try:
        receipt = await queue.submit(
            fields.payload,
            id=fields.id,
            delay=fields.delay,
            at=fields.at,
            max_attempts=fields.max_attempts,
            handler_timeout=fields.handler_timeout,
            task=fields.task,
            priority=fields.priority,
            headers=fields.headers,
            after=fields.after,
            unique_key=fields.unique_key,
            debounce=fields.debounce,
            rate_key=fields.rate_key,
        )
    except IdempotencyConflict as exc:
        return error(
            409,
            "conflict",
            str(exc),
            id=exc.job_id,
            stored_hash=exc.existing_hash,
            new_hash=exc.new_hash,
        )
    except DependencyNotFound as exc:
        return error(422, "unknown_after", str(exc), id=exc.child, after=exc.job_id)
    except (TypeError, ValueError) as exc:
        return error(400, "bad_delay" if fields.delay or fields.at else "bad_job", str(exc))
    except QueueFull as exc:  # submit meets one only as a memory budget's MemoryFull
        if isinstance(exc, MemoryFull) and exc.size > exc.max_bytes:
            return error(413, "too_large", too_large_for_memory(exc))
        logger.warning("answered 503: %s", exc)
        return error(503, "full", FULL_MESSAGE)
    except BackendUnavailable as exc:
        return unavailable(exc, "nothing was stored: send it again")
    if receipt.deduplicated:  # the stored record, to a client that may read it
        record = await queue.status(receipt.id) if access.may_read(request) else None
        found = access.record(record) if record is not None else receipt_json(receipt)
        return JSONResponse({**found, "deduplicated": True}, 200)
    # under the path the app is mounted at, if any; headers are Latin-1
    where = request.scope.get("root_path", "") + "/jobs/" + quote(receipt.id, safe="")
    location = {"Location": where}
    return JSONResponse(receipt_json(receipt), 201 if receipt.queued else 202, headers=location)


async def get_job(request: Request, queue: Queue, access: Access) -> JSONResponse:
    """The record of the job the path names; 404 when unknown or evicted."""
    refused = access.refuse_read(request)
    if refused is not None:
        return refused
    job_id = request.path_params["job_id"]
    try:
        record = await queue.status(job_id)
    except BackendUnavailable as exc:
        return unavailable(exc, "try again")
    if record is None:
        return error(
            404,
            "not_found",
            f"no job {job_id!r}: never enqueued, or finished and forgotten (the retention)",
        )
    return JSONResponse(access.record(record))
