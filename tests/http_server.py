"""The HTTP service on a real socket, for the tests: Hypercorn's Trio worker, a free port."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import ASGIApp


@asynccontextmanager
async def served(app: ASGIApp) -> AsyncIterator[httpx.AsyncClient]:
    """Serve *app* on 127.0.0.1 and a free port; an httpx client for it, shut down after."""
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
            async with httpx.AsyncClient(base_url=binds[0], timeout=30) as client:
                yield client
        finally:
            stop.set()
