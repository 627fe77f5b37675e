"""The sharded backend's shards: opening them, agreeing on their count, routing ids and claims."""

from __future__ import annotations

import zlib
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Final, Self

import attrs

from ..._exceptions import ConfigurationError
from ..._metrics import Gauges, Metrics

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..._backend_values import (
        Claim,
    )
    from ._backend import RedisBackend
    from ._queue_settings import QueueSettings

__all__ = ["MOST_SHARDS", "ShardsBase", "shard_names", "shard_of"]


MOST_SHARDS: Final = 1024


def shard_names(queue: str, shards: int) -> list[str]:
    """The shard queues of logical queue *queue*: ``{queue:0}`` … ``{queue:K-1}``.

    Braces in *queue* are dropped first: each shard carries a hash tag of its own.
    """
    bare = queue.replace("{", "").replace("}", "")
    return ["{" + f"{bare}:{i}" + "}" for i in range(shards)]


def shard_of(job_id: str, shards: int) -> int:
    return zlib.crc32(job_id.encode()) % shards


class ShardsBase:
    """What every part of `ShardedBackend` shares: its shards, and which holds an id or claim."""

    def __init__(self, shards: Sequence[RedisBackend]) -> None:
        if not shards:
            raise ConfigurationError("ShardedBackend([]): give at least one shard")
        leases = {shard.default_lease for shard in shards}
        if len(leases) > 1:
            raise ConfigurationError(
                f"ShardedBackend: the shards' min_idle differ ({sorted(leases)}); give them one"
            )
        self._shards = tuple(shards)
        self._turn = 0  # the shard a claim looks at first
        self._gauges = Gauges()
        self._metrics = Metrics(lambda: self._gauges)
        self._stack = AsyncExitStack()
        for shard in self._shards:
            # one process-local view: the pool records its histograms here, and every
            # shard counts its local events into the same metrics
            shard._metrics = self._metrics

    def __repr__(self) -> str:
        names = ", ".join(shard.keys.ready for shard in self._shards)
        return f"<trioqueue.ShardedBackend shards=[{names}]>"

    async def __aenter__(self) -> Self:
        """Open every shard's client, and check the shard count stored with the queue.

        Raises:
            ConfigurationError: The queue was made with another shard count.
        """
        async with AsyncExitStack() as stack:
            for shard in self._shards:
                await stack.enter_async_context(shard)
            await self._agree_on_count()
            self._stack = stack.pop_all()
        return self

    async def _agree_on_count(self) -> None:
        """Store the shard count in the first shard's settings, or check it against them.

        The count decides which shard holds each id: a process with another one
        would store ids a second time on other shards and strand their jobs. The
        first process to open the queue stores its count (``HSETNX``, so two that
        start together agree on one); every later one must give the same.
        """
        first = self._shards[0]
        given = len(self._shards)
        await first.command("HSETNX", first.keys.config, "shards", given)
        stored = await first.command("HGET", first.keys.config, "shards")
        if isinstance(stored, bytes):
            stored = stored.decode()
        if str(stored) != str(given):
            raise ConfigurationError(
                f"the sharded queue whose first shard is {first.keys.ready!r} is spread over "
                f"{stored} shards; this "
                f"process asked for {given}. Give shards={stored} (--shards {stored}) as every "
                "process using it does: the count decides which shard holds each id. To "
                "change it, drain the queue and delete its keys first"
            )

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    @property
    def shards(self) -> tuple[RedisBackend, ...]:
        """The shard queues, in order."""
        return self._shards

    @property
    def capacity(self) -> int:
        """The most jobs waiting in all shards together (each shard holds its part)."""
        return sum(shard.capacity for shard in self._shards)

    @property
    def metrics(self) -> Metrics:
        """Counters and histograms of this process, over every shard."""
        return self._metrics

    @property
    def default_lease(self) -> float:
        """The shards' *min_idle*."""
        return self._shards[0].default_lease

    @property
    def redelivers(self) -> bool:
        """Whether the shards are reliable (at-least-once)."""
        return self._shards[0].redelivers

    @property
    def settings(self) -> QueueSettings:
        """The first shard's settings (`configure` keeps them alike), with the total capacity."""
        return self._total(self._shards[0].settings)

    def _total(self, settings: QueueSettings) -> QueueSettings:
        return attrs.evolve(settings, capacity=settings.capacity * len(self._shards))

    def now(self) -> float:
        """The shards' clock."""
        return self._shards[0].now()

    def shard_for(self, job_id: str) -> RedisBackend:
        """The shard that holds (or would hold) job *job_id*."""
        return self._shards[shard_of(job_id, len(self._shards))]

    def _wrap(self, shard: int, claims: list[Claim]) -> list[Claim]:
        return [attrs.evolve(claim, token=f"{shard}/{claim.token}") for claim in claims]

    def _unwrap(self, claim: Claim) -> tuple[RedisBackend, Claim]:
        shard, _, token = claim.token.partition("/")
        return self._shards[int(shard)], attrs.evolve(claim, token=token)

    def _by_shard(self, claims: Sequence[Claim]) -> dict[int, list[Claim]]:
        groups: dict[int, list[Claim]] = {}
        for claim in claims:
            shard, _, token = claim.token.partition("/")
            groups.setdefault(int(shard), []).append(attrs.evolve(claim, token=token))
        return groups
