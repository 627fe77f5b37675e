"""The HTTP service on a real socket, for the tests: Hypercorn's Trio worker, a free port."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import ASGIApp


# A server that answers before it has read a request's body (413 for a body known to be
# too long, or a connection closed by a shutdown) leaves httpx's body iterator unread,
# and httpx says so when it is collected: expected there, and harmless.
UNREAD_BODY = pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*ByteStream:pytest.PytestUnraisableExceptionWarning"
)


@asynccontextmanager
async def served(app: ASGIApp, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """Serve *app* on 127.0.0.1 and a free port; an httpx client for it, shut down after.

    With *token*, the client sends it on every request (``Authorization: Bearer``).
    """
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(
                app, config, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            headers = {"Authorization": f"Bearer {token}"} if token else None
            async with httpx.AsyncClient(base_url=binds[0], timeout=30, headers=headers) as client:
                yield client
        finally:
            stop.set()
