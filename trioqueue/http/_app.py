"""The HTTP service's ASGI app: seed 003's door in front of a trioqueue backend.

Built on Starlette, which runs on AnyIO and so on Trio itself (no asyncio
bridge); served by Hypercorn's Trio worker (``trioqueue serve``) or embedded in
any Trio ASGI server.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Final

import attrs
import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse
from starlette.routing import Route

from .._exceptions import BackendUnavailable, ConfigurationError
from .._queue import Queue
from ._access import Access
from ._batch import post_batch
from ._browse import Browse
from ._dead import AdminActions
from ._hosts import HostCheck
from ._jobs import error, get_job, post_job, unavailable
from ._json import JSONResponse
from ._limits import Limits
from ._metrics import metrics_endpoint
from ._openapi import openapi_document

_PAGE_HEADERS: Final = {
    "X-Frame-Options": "DENY",  # no other site may frame the dashboard (its buttons act)
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""Headers of the dashboard page: never in a frame, never sniffed as another type."""

if TYPE_CHECKING:
    from collections.abc import Iterable

    from starlette.requests import Request
    from starlette.types import ASGIApp

    from .._backend import Backend

__all__ = ["DEFAULT_MAX_BODY", "create_app"]

DEFAULT_MAX_BODY: Final = 1024 * 1024 + 4096  # a payload at max_payload, and its envelope
_READY_WITHIN: Final = 2.0  # seconds /readyz waits for the backend


def create_app(
    backend: Backend,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    concurrency: int = 64,
    request_timeout: float = 10.0,
    admin_token: str | None = None,
    ingest_token: str | None = None,
    name: str = "jobs",
    tracebacks: bool = False,
    allowed_hosts: Iterable[str] | None = None,
) -> ASGIApp:
    """The HTTP service for *backend*, as an ASGI app to serve or embed.

    Open the backend first (``async with backend:``) and keep it open while
    the app serves; a worker pool on the same backend may run beside it, in
    this process or elsewhere.

    Args:
        backend: Where the jobs go; any `trioqueue.Backend`.
        max_body: The largest request body, in bytes; larger is refused with 413.
        concurrency: Requests served at once; more wait for a place.
        request_timeout: Seconds one request may take, its wait for a place
            included; past it the answer is 503 with ``Retry-After``.
        admin_token: The bearer token that reading jobs and dead letters needs,
            and requeueing and purging dead letters, cancelling jobs, and pausing
            and resuming the queue; None turns those changes off (403). The
            counters, health and the OpenAPI document never need a token.
        ingest_token: The bearer token that sending jobs (``POST /jobs``,
            ``POST /jobs/batch``) needs. Once either token is set, every write
            needs one of them (the admin token will do); with neither, anyone
            may send plain jobs, and the fields that act on other jobs
            (``unique_key``, ``debounce``, ``after``, ``rate_key``, ``headers``,
            ``priority``) are refused (403). Reading jobs needs the admin token,
            or this one when there is no admin token.
        name: The queue's name in ``/metrics`` (its ``queue`` label).
        tracebacks: Serve the last error's traceback in records; by default a
            record shows the error's type and message only.
        allowed_hosts: The names the service answers to in the ``Host`` header
            (an IP address always passes); others get 400, which stops DNS
            rebinding. None checks nothing: for an app mounted in a server that
            checks ``Host`` itself.

    Raises:
        ConfigurationError: A limit is not a positive number, or the token is empty.
    """
    if admin_token is not None and not admin_token.strip():
        raise ConfigurationError(
            "create_app(admin_token=''): give a token (a long random string), or None to "
            "keep requeueing, purging, cancelling and pausing off"
        )
    if ingest_token is not None and not ingest_token.strip():
        raise ConfigurationError(
            "create_app(ingest_token=''): give a token (a long random string), or None"
        )
    for limit, value in (
        ("max_body", max_body),
        ("concurrency", concurrency),
        ("request_timeout", request_timeout),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigurationError(f"create_app({limit}={value!r}): use a number > 0")
    queue = Queue(backend)
    access = Access(admin_token, tracebacks=tracebacks, ingest_token=ingest_token)
    dead = AdminActions(queue, access)
    browse = Browse(queue, access)

    async def jobs(request: Request) -> JSONResponse:
        if request.method == "GET":
            return await browse.list(request)
        return await post_job(request, queue, max_body, access)

    async def batch(request: Request) -> JSONResponse:
        return await post_batch(request, queue, max_body, access)

    async def job(request: Request) -> JSONResponse:
        if request.method == "DELETE":
            return await dead.cancel(request)
        return await get_job(request, queue, access)

    async def stats(request: Request) -> JSONResponse:
        try:
            snapshot = await backend.stats()
            paused = await backend.is_paused()
            limits = await backend.rate_limits()
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        return JSONResponse(
            {**attrs.asdict(snapshot), "paused": paused, "rate_limits": limits.as_json()}
        )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"alive": True})

    async def readyz(request: Request) -> JSONResponse:
        with trio.move_on_after(_READY_WITHIN):
            try:
                await backend.pending()
            except BackendUnavailable as exc:
                return unavailable(exc, "not ready")
            return JSONResponse({"ready": True})
        return error(503, "unavailable", f"the backend did not answer within {_READY_WITHIN:g} s")

    document = openapi_document(max_body)
    page = resources.files(__package__).joinpath("dashboard.html").read_text(encoding="utf-8")
    page = page.replace("{token}", "required" if admin_token is not None else "none", 1)

    async def dashboard(request: Request) -> HTMLResponse:
        return HTMLResponse(page, headers=_PAGE_HEADERS)

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(document)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        # the router's own answers (no such path, a method not allowed) in JSON too
        assert isinstance(exc, HTTPException)
        return JSONResponse(
            {"error": "http", "message": f"{exc.detail} ({request.method} {request.url.path})"},
            exc.status_code,
            headers=exc.headers,
        )

    app = Starlette(
        exception_handlers={HTTPException: http_error},
        routes=[
            Route("/", dashboard, methods=["GET"]),
            Route("/jobs", jobs, methods=["GET", "POST"]),
            Route("/jobs/batch", batch, methods=["POST"]),
            Route("/jobs/{job_id:path}/run", browse.run_now, methods=["POST"]),
            Route("/jobs/{job_id:path}", job, methods=["GET", "DELETE"]),
            Route("/dead", dead.list_or_purge_all, methods=["GET", "DELETE"]),
            Route("/dead/requeue", dead.requeue_all, methods=["POST"]),
            Route("/dead/{job_id:path}/requeue", dead.requeue, methods=["POST"]),
            Route("/dead/{job_id:path}", dead.purge, methods=["DELETE"]),
            Route("/queue/pause", dead.pause_or_resume, methods=["POST"]),
            Route("/queue/resume", dead.pause_or_resume, methods=["POST"]),
            Route("/metrics", metrics_endpoint(backend, name), methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
        ],
    )
    checked: ASGIApp = app if allowed_hosts is None else HostCheck(app, allowed_hosts)
    return Limits(
        checked,
        concurrency=int(concurrency),
        timeout=float(request_timeout),
        max_body=int(max_body),
    )
