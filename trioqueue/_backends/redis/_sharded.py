"""One logical queue spread over several Redis queues (shards), for Redis Cluster.

A queue's keys share one hash slot, so one queue lives on one cluster node.
`ShardedBackend` spreads a logical queue ``thumbnails`` over K queues
``{thumbnails:0}`` … ``{thumbnails:K-1}``, whose slots fall on different nodes:

- a job goes to the shard its id picks (CRC-32 of the id, modulo K), so
  idempotency by id stays exact: the same id always meets its own record;
- a claim looks at every shard, starting from the next one each call, so no
  shard starves; with none ready it waits on all of them at once;
- outcomes go back to the shard that made the claim (its token says which);
- stats, pending jobs and dead letters add up across shards.

Each shard is a whole `RedisBackend` queue, with its own capacity, its own FIFO
order and its own priority levels: there is no order across shards. A claim
takes each shard's highest level first, but may take a lower job from one shard
before a higher job of another that it looks at later.
"""

from __future__ import annotations

import math
from typing import Any, final

from ..._backend_values import checked_capacity
from ..._exceptions import ConfigurationError
from ._backend import RedisBackend
from ._sharded_views import ShardedViews
from ._sharded_work import ShardedWork
from ._shards import MOST_SHARDS, shard_names

__all__ = ["ShardedBackend"]


@final
class ShardedBackend(ShardedViews, ShardedWork):
    """One logical queue spread over several `RedisBackend` queues (see the module).

    Make one with `ShardedBackend.on_redis`, and use it as an async context
    manager, like a `RedisBackend`; `Queue` and `open_worker_pool` take it as any
    backend. Every process that names the same queue and shard count shares it.

    Cancellation: as the `Backend` protocol says, shard by shard; a claim
    gathered from several shards reaches the caller whole.

    Args:
        shards: The shard queues, in order (the order picks each id's shard: keep
            it the same in every process).

    Raises:
        ConfigurationError: No shard, or shards that disagree on their lease.
    """

    @classmethod
    def on_redis(
        cls,
        url: str,
        *,
        queue: str,
        shards: int,
        capacity: int | None = None,
        **options: Any,
    ) -> ShardedBackend:
        """A logical queue *queue* over *shards* Redis queues, ``{queue:0}`` … ``{queue:K-1}``.

        Args:
            url: As for `RedisBackend`; on a cluster, ``…?cluster=yes``.
            queue: The logical queue's name (without a hash tag: each shard gets
                its own).
            shards: How many shard queues (1 to 1024). Use the same number in
                every process: it decides which shard holds each id.
            capacity: The most jobs waiting in all shards together; each shard
                gets an equal part (rounded up). None: each shard's own.
            options: Every other `RedisBackend` option, given to each shard.

        Raises:
            ConfigurationError: A bad shard count or option; the message says what.
        """
        if (
            isinstance(shards, bool)
            or not isinstance(shards, int)
            or not (1 <= shards <= MOST_SHARDS)
        ):
            raise ConfigurationError(
                f"ShardedBackend.on_redis(shards={shards!r}): use a whole number from 1 to "
                f"{MOST_SHARDS}, the same in every process using the queue"
            )
        if "stream" in options:
            raise ConfigurationError(
                "ShardedBackend.on_redis(stream=...): a stream source is not sharded; shard "
                "the stream yourself, one stream source per key"
            )
        if capacity is not None:
            capacity = checked_capacity("ShardedBackend.on_redis", capacity)
        each = None if capacity is None else math.ceil(capacity / shards)
        return cls(
            [
                RedisBackend(url, queue=name, capacity=each, **options)
                for name in shard_names(queue, shards)
            ]
        )
