"""Bounded work for the HTTP service: requests at once, and time per request.

Plain ASGI middleware around the app: a request waits for one of *concurrency*
places, and the wait plus the request's own work is cut off after *timeout*
seconds with a 503 (and ``Retry-After``). Every backend call is atomic with
respect to cancellation, so a request cut off changed nothing it did not finish:
a client that sends it again with the same id gets the job, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ._jobs import error

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Limits"]


class Limits:
    """ASGI middleware: at most *concurrency* requests at once, each within *timeout* s.

    After `stop_accepting`, a new request gets 503 and ``Connection: close``: a
    server that is shutting down finishes the requests in flight, but a client on
    a kept-alive connection would otherwise go on sending new ones.
    """

    def __init__(self, app: ASGIApp, *, concurrency: int, timeout: float) -> None:
        self._app = app
        self._places = trio.CapacityLimiter(concurrency)
        self._timeout = timeout
        self._stopping = False

    def stop_accepting(self) -> None:
        """Answer every request from now on with 503 (the service is shutting down)."""
        self._stopping = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._stopping:
            response = error(
                503,
                "stopping",
                "the service is shutting down and stored nothing: send it to another "
                "instance, or again once it is back",
            )
            response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
        started = False

        async def watched(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        with trio.move_on_after(self._timeout) as deadline:
            async with self._places:
                await self._app(scope, receive, watched)
        if deadline.cancelled_caught and not started:
            response = error(
                503,
                "timeout",
                f"the request took over {self._timeout:g} s (--request-timeout) and was "
                "stopped; anything it did not finish was not done: send it again",
            )
            await response(scope, receive, send)
