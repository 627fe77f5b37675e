"""A handler's way to its pool's Redis: `current_redis`."""

from __future__ import annotations

from ..._current import current_backend
from ..._exceptions import TrioqueueError
from ._backend import RedisBackend

__all__ = ["current_redis"]


def current_redis() -> RedisBackend:
    """The `RedisBackend` of the worker pool that runs the calling handler.

    A handler that makes Redis calls of its own sends them on the pool's own
    connections with `RedisBackend.command`, instead of opening a client (a
    second client costs a connection, its start-up, and on Trio a slower round
    trip)::

        async def handler(job: trioqueue.Job) -> None:
            await trioqueue.current_redis().command("SET", f"seen:{job.id}", 1)

    Raises:
        TrioqueueError: Called outside a handler that a worker pool runs, or the
            pool's backend is not a `RedisBackend` (a `ShardedBackend` holds
            several: use one of its ``shards``).
    """
    backend = current_backend()
    if isinstance(backend, RedisBackend):
        return backend
    raise TrioqueueError(
        f"the pool running this handler is on {backend!r}, not on one RedisBackend: "
        "current_redis() gives a RedisBackend's own connection (for a ShardedBackend, "
        "send commands through one of its shards)"
    )
