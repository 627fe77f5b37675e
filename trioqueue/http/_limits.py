"""Bounded work for the HTTP service: requests at once, and time per request.

Plain ASGI middleware around the app: a request's body is read first, then the
request waits for one of *concurrency* places, and all of it is cut off after
*timeout* seconds with a 503 (and ``Retry-After``). Reading the body before
taking a place keeps slow uploads from holding the places a fast client needs;
what bodies in reading may hold in memory together is bounded by a byte budget
(*concurrency* times *max_body*, what the places could hold before), and a body over
*max_body* is read no further: the app answers 413. Every backend call is atomic
with respect to cancellation, so a request cut off changed nothing it did not
finish: a client that sends it again with the same id gets the job, once.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from ._jobs import error

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Limits"]


class Limits:
    """ASGI middleware: at most *concurrency* requests at once, each within *timeout* s.

    After `stop_accepting`, a new request gets 503 and ``Connection: close``: a
    server that is shutting down finishes the requests in flight, but a client on
    a kept-alive connection would otherwise go on sending new ones.
    """

    def __init__(self, app: ASGIApp, *, concurrency: int, timeout: float, max_body: int) -> None:
        self._app = app
        self._places = trio.CapacityLimiter(concurrency)
        self._timeout = timeout
        self._stopping = False
        self._max_body = max_body
        self._budget = _Budget(concurrency * (max_body + 1))

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
        body = _Body(self._max_body, _declared_length(scope))

        async def watched(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not body.read_whole:
                    # what is left of the body would be read as the next request: a
                    # client that is told so opens a new connection instead of waiting
                    message = {**message, "headers": [*message["headers"], _CLOSE]}
            await send(message)

        with trio.move_on_after(self._timeout) as deadline:
            async with self._buffered(receive, body) as replay, self._places:
                await self._app(scope, replay, watched)
        if deadline.cancelled_caught and not started:
            response = error(
                503,
                "timeout",
                f"the request took over {self._timeout:g} s (--request-timeout) and was "
                "stopped; anything it did not finish was not done: send it again",
            )
            await response(scope, receive, send)

    @asynccontextmanager
    async def _buffered(self, receive: Receive, body: _Body) -> AsyncIterator[Receive]:
        """Read the whole body (at most *max_body* + 1 bytes); a receive that replays it.

        A body declared longer than *max_body* is not read at all: the app answers 413
        from its length, and a client waiting for leave to send it (``Expect:
        100-continue``) gets that answer at once. The bytes stay taken from the budget
        until the request is done with them.
        """
        messages: list[Message] = []
        taken = 0
        try:
            while not body.too_long:
                message = await receive()
                size = len(message.get("body", b""))
                taken += await self._budget.take(size)
                messages.append(message)
                if message["type"] != "http.request" or not message.get("more_body"):
                    body.read_whole = True
                    break
                body.read += size  # over max_body: the app answers 413, and the rest is not read
            replayed = iter(messages)

            async def replay() -> Message:
                for message in replayed:
                    return message
                return await receive()  # past the body: a disconnect, when it comes

            yield replay
        finally:
            self._budget.give(taken)


_CLOSE: Final = (b"connection", b"close")


@attrs.define
class _Body:
    """How much of one request's body was read, and whether all of it."""

    limit: int
    declared: int  # by its Content-Length; 0 when it has none
    read: int = 0
    read_whole: bool = False

    @property
    def too_long(self) -> bool:
        """Whether the body is known to be over the limit (the app answers 413)."""
        return max(self.declared, self.read) > self.limit


def _declared_length(scope: Scope) -> int:
    """The body's length as its ``Content-Length`` declares it; 0 if it does not."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit():
            return int(value)
    return 0


class _Budget:
    """Bytes that bodies in reading may hold together; a taker waits until they free."""

    def __init__(self, total: int) -> None:
        self._total = total
        self._free = total
        self._freed = trio.lowlevel.ParkingLot()

    async def take(self, size: int) -> int:
        """Take *size* bytes (at most the whole budget), waiting while fewer are free.

        Returns what was taken. A checkpoint; cancelled, it took nothing.
        """
        size = min(size, self._total)  # one message larger than the budget still goes
        await trio.lowlevel.checkpoint()
        while self._free < size:
            await self._freed.park()
        self._free -= size
        return size

    def give(self, size: int) -> None:
        """Give back *size* bytes taken."""
        self._free += size
        self._freed.unpark_all()
