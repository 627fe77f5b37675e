"""The HTTP service's ASGI app: seed 003's door in front of a trioqueue backend.

Built on Starlette, which runs on AnyIO and so on Trio itself (no asyncio
bridge); served by Hypercorn's Trio worker (``trioqueue serve``) or embedded in
any Trio ASGI server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from .._exceptions import BackendUnavailable, ConfigurationError
from .._queue import Queue
from ._jobs import error, get_job, post_job
from ._limits import Limits
from ._openapi import openapi_document

if TYPE_CHECKING:
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
) -> ASGIApp:
    """The HTTP service for *backend*, as an ASGI app to serve or embed.

    Open the backend first (``async with backend:``) and keep it open while
    the app serves; a worker pool on the same backend may run beside it, in
    this process or elsewhere.

    Args:
        backend: Where the jobs go; any `Backend`.
        max_body: The largest request body, in bytes; larger is refused with 413.
        concurrency: Requests served at once; more wait for a place.
        request_timeout: Seconds one request may take, its wait for a place
            included; past it the answer is 503 with ``Retry-After``.

    Raises:
        ConfigurationError: A limit is not a positive number.
    """
    for name, value in (
        ("max_body", max_body),
        ("concurrency", concurrency),
        ("request_timeout", request_timeout),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigurationError(f"create_app({name}={value!r}): use a number > 0")
    queue = Queue(backend)

    async def jobs(request: Request) -> JSONResponse:
        return await post_job(request, queue, max_body)

    async def job(request: Request) -> JSONResponse:
        return await get_job(queue, request.path_params["job_id"])

    async def stats(request: Request) -> JSONResponse:
        try:
            snapshot = await backend.stats()
        except BackendUnavailable as exc:
            return error(503, "unavailable", str(exc))
        return JSONResponse(attrs.asdict(snapshot))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"alive": True})

    async def readyz(request: Request) -> JSONResponse:
        with trio.move_on_after(_READY_WITHIN):
            try:
                await backend.pending()
            except BackendUnavailable as exc:
                return error(503, "unavailable", str(exc))
            return JSONResponse({"ready": True})
        return error(503, "unavailable", f"the backend did not answer within {_READY_WITHIN:g} s")

    document = openapi_document(max_body)

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(document)

    app = Starlette(
        routes=[
            Route("/jobs", jobs, methods=["POST"]),
            Route("/jobs/{job_id:path}", job, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
        ]
    )
    return Limits(app, concurrency=int(concurrency), timeout=float(request_timeout))
