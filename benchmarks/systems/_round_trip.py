"""The one Redis round trip a handler makes in the I/O workload, per runtime.

With ``--handler-io redis`` every system's handler, right after
``recorder.record(payload)``, writes one key (``SET io:<i> <i>``) and waits for
the reply, as a real handler that stores a result or reads a row does. Each
runtime uses the fastest Redis client it has, created once per worker process
and shared by all its handlers:

- Trio (trioqueue, streaQ on Trio): valkey-glide, whose Rust core multiplexes
  every request over one connection; it did 3.1-3.4x coredis's requests per
  second from 32 Trio tasks (docs/benchmarks.md, "The Redis client").
- asyncio (saq, taskiq, arq, streaQ on asyncio): ``redis.asyncio`` with the
  hiredis parser, one connection per concurrent handler from its pool.
- threads (dramatiq): the synchronous ``redis.Redis``, a pool shared by the
  worker threads.

Each factory returns ``None`` for ``--handler-io none`` (the no-op workload),
so the handler then pays no call at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from _adapter import Args, Recorder

    AsyncRoundTrip = Callable[[Mapping[str, Any]], Awaitable[None]]
    SyncRoundTrip = Callable[[Mapping[str, Any]], None]

REQUEST_TIMEOUT = 10.0  # seconds; glide's default (250 ms) is for latency-bound services


def _key(payload: Mapping[str, Any]) -> str:
    return f"io:{payload['i']}"


async def trio_round_trip(args: Args) -> AsyncRoundTrip | None:
    """A glide client's ``SET``, for handlers on Trio; call from inside ``trio.run``."""
    if args.handler_io == "none":
        return None
    import glide

    glide.Logger.set_logger_config(glide.LogLevel.OFF)  # it logs to standard output
    parts = urlsplit(args.url)
    client = await glide.GlideClient.create(
        glide.GlideClientConfiguration(
            [glide.NodeAddress(parts.hostname or "127.0.0.1", parts.port or 6379)],
            request_timeout=int(REQUEST_TIMEOUT * 1000),
        )
    )

    async def round_trip(payload: Mapping[str, Any]) -> None:
        await client.set(_key(payload), str(payload["i"]))

    return round_trip


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
