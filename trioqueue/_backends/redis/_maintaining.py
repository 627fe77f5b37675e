"""The Redis backend's upkeep: settings changes, the sweep, dead letters, schedule marks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._backend_values import SweepReport, checked_capacity, not_waiting_for_due_time
from ..._exceptions import ConfigurationError, JobNotFound
from ..._rate import RateLimit, RateLimits
from ._connection import decode_record, text
from ._queue_settings import QueueSettings, decode_settings

if TYPE_CHECKING:
    from ..._records import JobRecord
from ._base import RedisBase, check_seconds

__all__ = ["Maintaining"]


class Maintaining(RedisBase):
    """RedisBackend methods: settings changes, the sweep, dead letters, schedule marks."""

    async def requeue_dead(self, job_id: str) -> JobRecord:
        """Put a dead letter back with fresh attempts; see `Backend.requeue_dead`."""
        reply = await self._run("requeue_dead", job_id)
        done = int(reply[0])
        if done == -1:
            raise JobNotFound(
                job_id,
                "dead letters with a record",
                "its id is on the dead-letter list but its record is gone (deleted by "
                "hand); nothing was requeued. Forget the id with purge_dead",
            )
        if not done:
            raise JobNotFound(job_id, "dead letters")
        self._metrics.dead_requeued += 1
        flat = reply[1]  # the record as requeued, before any worker could claim it
        return decode_record(job_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def run_now(self, job_id: str) -> JobRecord:
        """Make a job that waits for its due time due now; see `Backend.run_now`."""
        reply = await self._run("run_now", job_id)
        if not int(reply[0]):
            raise not_waiting_for_due_time(job_id)
        flat = reply[1]
        return decode_record(job_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def purge_dead(self, job_id: str | None = None) -> int:
        """Forget one dead letter, or all of them; return how many were forgotten.

        All of them go a slice per script call, so Redis serves others in between.
        """
        if job_id is not None:
            return int(await self._run("purge_dead", job_id))
        total = 0
        while purged := int(await self._run("purge_dead", "")):
            total += purged
        return total

    async def mark_schedule(self, name: str, tick: float) -> None:
        """Record schedule *name*'s latest tick stored; see `Backend.mark_schedule`.

        Kept in the queue's config hash (``cron:<name>``), so it lives and expires
        with the queue's settings.
        """
        await self._run("mark_schedule", name, repr(float(tick)))

    async def schedule_marks(self) -> dict[str, float]:
        """Each schedule's latest tick stored; see `Backend.schedule_marks`."""
        flat = await self._run("schedule_marks")
        return {text(name): float(tick) for name, tick in zip(flat[::2], flat[1::2], strict=True)}

    async def pause(self) -> None:
        """Pause the queue for every process using it; see `Backend.pause`.

        Stored in the queue's config hash, which every claim script reads.
        """
        await self._run("pause", "1")

    async def resume(self) -> None:
        """Resume a paused queue; see `Backend.resume`."""
        await self._run("pause", "0")

    async def is_paused(self) -> bool:
        """Whether the queue is paused; see `Backend.is_paused`."""
        return bool(await self._run("pause", ""))

    async def set_rate_limits(self, limits: RateLimits) -> None:
        """Limit how fast the queue's jobs start, for every process; see `Backend.set_rate_limits`.

        Stored in the queue's config hash, which every claim script reads.

        Raises:
            ConfigurationError: A per-key limit for a stream source, whose jobs
                carry no rate key.
        """
        if self._stream is not None and limits.per_key is not None:
            raise ConfigurationError(
                f"stream {self._stream.stream!r}: a stream source's jobs carry no rate_key, "
                "so a per-key limit would limit nothing; give it a queue limit only, or "
                "enqueue rate-keyed jobs to a list queue (RedisBackend(url, queue=...))"
            )
        stored = [limit.stored() if limit else "" for limit in (limits.queue, limits.per_key)]
        await self._run("rate_limit", "1", *stored)

    async def rate_limits(self) -> RateLimits:
        """The queue's rate limits; see `Backend.rate_limits`."""
        queue, per_key = await self._run("rate_limit", "", "", "")
        return RateLimits(RateLimit.from_stored(queue), RateLimit.from_stored(per_key))

    async def configure(
        self,
        *,
        capacity: int | None = None,
        reliable: bool | None = None,
        key_ttl: float | None = None,
        no_key_ttl: bool = False,
    ) -> QueueSettings:
        """Change the queue's stored settings; every process using the queue follows at once.

        Settings left as None stay as they are. The capacity may change at any
        time (raised, it moves stored jobs up into the new room at once). The
        mode and the key TTL decide how waiting and claimed jobs are kept, so
        they change only while the queue holds none (dead letters and finished
        records may stay): drain it first. *no_key_ttl* removes the key TTL.

        Returns:
            The settings stored now, which this backend follows from here on.

        Raises:
            ConfigurationError: A value is out of range, both *key_ttl* and
                *no_key_ttl* were given, the queue does not exist yet, or it
                still holds jobs that a mode or key TTL change would strand.
            BackendUnavailable: Redis cannot be reached.

        Cancellation: a checkpoint; cancelled, it has changed nothing. The change is
        one script: once sent, it is waited for.
        """
        if self._stream is not None:
            raise ConfigurationError(
                f"RedisBackend.configure: {self._stream.stream!r} is a stream, which has no "
                "capacity, mode or key TTL to change"
            )
        if capacity is not None:
            capacity = checked_capacity("RedisBackend.configure", capacity)
        check_seconds("key_ttl", key_ttl)
        if no_key_ttl and key_ttl is not None:
            raise ConfigurationError(
                f"RedisBackend.configure(key_ttl={key_ttl!r}, no_key_ttl=True): give one of them"
            )
        if reliable is not None:
            self._check_mode(reliable)  # this backend's own options must suit the new mode
        mode = "" if reliable is None else ("reliable" if reliable else "simple")
        ttl = "none" if no_key_ttl else ("" if key_ttl is None else repr(float(key_ttl)))
        # not self._run: this backend's own settings need not agree with the old ones
        reply = await self._conn.run("configure", "" if capacity is None else capacity, mode, ttl)
        queue = self._keys.ready
        if reply[0] == 0:
            raise ConfigurationError(
                f"queue {queue!r} does not exist here yet (it has no settings): check the "
                "name, or create it by using it (enqueue to it) with the settings you want"
            )
        if reply[0] == -1:
            raise ConfigurationError(
                f"queue {queue!r} holds {reply[1]} waiting and {reply[2]} claimed jobs: its "
                "mode and key TTL change only while it holds none (they decide how those "
                "jobs are kept); stop its producers, let the workers drain it, then try again"
            )
        settings = decode_settings(reply[1:4])
        assert settings is not None  # the script just stored them
        self._settings, self._adopted = settings, True
        return settings

    async def sweep(self) -> SweepReport:
        """Recover claims, fail the followers left, schedule, evict; see `Backend.sweep`.

        Each script call does a bounded slice of the work (no call holds Redis
        for long, at any queue size); this calls again until nothing is left.
        """
        totals = [0, 0, 0, 0]
        more = 1
        while more:
            reply = [int(n) for n in await self._run("sweep", self.default_lease)]
            more = reply.pop(3)
            totals = [total + n for total, n in zip(totals, reply, strict=True)]
        scheduled, recovered, evicted, due = totals
        self._metrics.recovered += recovered
        return SweepReport(scheduled=scheduled, recovered=recovered, evicted=evicted, due=due)
