"""The one Redis round trip a handler makes in the I/O workload, per runtime.

With ``--handler-io redis`` every system's handler, right after
``recorder.record(payload)``, writes one key (``SET io:<i> <i>``) and waits for
the reply, as a real handler that stores a result or reads a row does. Each
runtime uses the fastest Redis client it has, created once per worker process
and shared by all its handlers:

- Trio (streaQ on Trio): coredis, the client streaQ itself runs on (anyio);
  trioqueue's handler sends its ``SET`` on the pool's own connections instead
  (``trioqueue.current_redis()``, see ``run_trioqueue.py``).
- asyncio (saq, taskiq, arq, streaQ on asyncio): ``redis.asyncio`` with the
  hiredis parser, one connection per concurrent handler from its pool.
- threads (dramatiq): the synchronous ``redis.Redis``, a pool shared by the
  worker threads.

Each factory returns ``None`` for ``--handler-io none`` (the no-op workload),
so the handler then pays no call at all.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

    from _adapter import Args, Recorder

    AsyncRoundTrip = Callable[[Mapping[str, Any]], Awaitable[None]]
    SyncRoundTrip = Callable[[Mapping[str, Any]], None]

REQUEST_TIMEOUT = 10.0  # seconds


def _key(payload: Mapping[str, Any]) -> str:
    return f"io:{payload['i']}"


@contextlib.asynccontextmanager
async def trio_round_trip(args: Args) -> AsyncIterator[AsyncRoundTrip | None]:
    """A coredis client's ``SET``, for handlers on Trio; enter inside ``trio.run``."""
    if args.handler_io == "none":
        yield None
        return
    import coredis

    async with coredis.Redis.from_url(args.url, stream_timeout=REQUEST_TIMEOUT) as client:

        async def round_trip(payload: Mapping[str, Any]) -> None:
            await client.set(_key(payload), str(payload["i"]))

        yield round_trip


async def asyncio_round_trip(args: Args) -> AsyncRoundTrip | None:
    """A ``redis.asyncio`` ``SET``, for handlers on asyncio; call from a running loop."""
    if args.handler_io == "none":
        return None
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(args.url, socket_timeout=REQUEST_TIMEOUT)

    async def round_trip(payload: Mapping[str, Any]) -> None:
        await client.set(_key(payload), payload["i"])

    return round_trip


def thread_round_trip(args: Args) -> SyncRoundTrip | None:
    """A synchronous ``redis.Redis`` ``SET``, for handlers on threads."""
    if args.handler_io == "none":
        return None
    import redis

    client = redis.Redis.from_url(
        args.url, socket_timeout=REQUEST_TIMEOUT, max_connections=args.concurrency + 8
    )

    def round_trip(payload: Mapping[str, Any]) -> None:
        client.set(_key(payload), payload["i"])

    return round_trip


def recorded(
    recorder: Recorder, round_trip: AsyncRoundTrip | None
) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
    """An async handler's body: record the job, then make its round trip (if any)."""

    async def on_job(payload: Mapping[str, Any]) -> None:
        recorder.record(payload)
        if round_trip is not None:
            await round_trip(payload)

    return on_job
