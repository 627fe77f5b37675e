"""The state every part of the Redis backend shares: settings, connection, the scripts' head."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Final, Self

import trio

from ..._backend_values import checked_capacity, checked_retention
from ..._exceptions import ConfigurationError
from ..._metrics import Gauges, Metrics
from ..._records import Retention
from .._waiters import Waiters
from ._batching import Batcher
from ._connection import text
from ._events import EventReader
from ._hiredis import HiredisConnection
from ._keys import RedisKeys
from ._queue_settings import QueueSettings, agreed_settings, decode_settings
from ._resp_pool import MAX_CONNECTIONS
from ._scripts import READ_ONLY
from ._stream import StreamSource, stream_options

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


__all__ = ["TIMER_SLACK", "RedisBase", "check_seconds"]

_DEFAULT_RETENTION: Final = Retention()


_MAX_OUTCOME_BATCH: Final = 256  # outcomes recorded in one script call at most


TIMER_SLACK: Final = 0.5
"""Seconds a blocking wait (``BLMOVE``, ``XREAD BLOCK``) is given past its timeout on
the server before Trio's deadline ends it by a cancellation. The server's timer
ends it first (at most 100 ms late on an idle server at hz 10), so the wait costs
no ``CLIENT UNBLOCK``; the deadline, one code path for every clock, ends it when the
server's timer cannot: on a mock clock (tests), or a server too slow to answer."""


_DEFAULT_MIN_IDLE: Final = 30.0  # the default lease, as `trioqueue worker --min-idle` has it


_NO_CAPACITY: Final = 2**63 - 1  # a stream's: nothing bounds it


_SHORTEST: Final = 0.001  # Redis keeps its timers in milliseconds


_LONGEST: Final = 100 * 365 * 24 * 3600.0  # a century: every timer script stays exact


def check_seconds(name: str, value: float | None, *, allow_none: bool = True) -> None:
    """Check a duration against what Redis's timers hold, before any script runs."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(f"RedisBackend({name}={value!r}): use a number of seconds")
    if not _SHORTEST <= value <= _LONGEST:
        raise ConfigurationError(
            f"RedisBackend({name}={value!r}): use a number of seconds from {_SHORTEST} "
            f"(Redis keeps time in milliseconds) to {_LONGEST:.0f} (a century)"
            + ("; None for no limit" if allow_none else "")
        )


class RedisBase:
    """What every part of `RedisBackend` shares: its settings, connection and the scripts' head."""

    def __init__(
        self,
        url: str,
        *,
        queue: str | None = None,
        capacity: int | None = None,
        min_idle: float | None = None,
        recovery_ttl: float | None = None,
        retention: Retention | int = _DEFAULT_RETENTION,
        processing: str | None = None,
        recovery_zset: str | None = None,
        clock: Callable[[], float] | None = None,
        reliable: bool | None = None,
        key_ttl: float | None = None,
        max_deliveries: int | None = 20,
        wait_replicas: int = 0,
        stream: str | None = None,
        group: str | None = None,
        start: str = "$",
        consumer: str | None = None,
        delete_done: bool = False,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._stream = stream_options(
            queue,
            stream,
            group,
            start,
            consumer,
            delete_done,
            given={
                "capacity": capacity,
                "reliable": reliable if reliable is False else None,
                "key_ttl": key_ttl,
                "processing": processing,
                "recovery_zset": recovery_zset,
            },
        )
        if capacity is not None:
            capacity = checked_capacity("RedisBackend", capacity)
        if reliable is False:
            for name, value in (("recovery_zset", recovery_zset), ("recovery_ttl", recovery_ttl)):
                if value is not None:
                    raise ConfigurationError(
                        f"RedisBackend(reliable=False, {name}={value!r}): a simple queue never "
                        f"redelivers, so it has no recovery set; drop {name}, or use "
                        "reliable=True for at-least-once delivery"
                    )
        self._min_idle_given = min_idle is not None
        min_idle = _DEFAULT_MIN_IDLE if min_idle is None else min_idle
        check_seconds("min_idle", min_idle)
        check_seconds("recovery_ttl", recovery_ttl)
        check_seconds("key_ttl", key_ttl)
        if max_deliveries is not None and (
            isinstance(max_deliveries, bool)
            or not isinstance(max_deliveries, int)
            or max_deliveries < 1
        ):
            raise ConfigurationError(
                f"RedisBackend(max_deliveries={max_deliveries!r}): use a whole number >= 1, "
                "above your RetryPolicy's max_attempts, or None for no limit"
            )
        if recovery_ttl is not None and min_idle is not None and recovery_ttl <= min_idle:
            raise ConfigurationError(
                f"RedisBackend(recovery_ttl={recovery_ttl!r}) must exceed min_idle={min_idle!r}: "
                "a recovery set that expires before its claims go idle would lose them"
            )
        if self._stream is not None:
            self._keys = RedisKeys.for_stream(self._stream.stream, self._stream.group)
        else:
            assert queue is not None  # stream_options checked it
            self._keys = RedisKeys.for_queue(queue, processing=processing, claims=recovery_zset)
        self._url = url
        self._wanted = (capacity, reliable, key_ttl)
        # until __aenter__ reads the queue's stored settings: what a new queue would get
        self._settings = agreed_settings(
            self._keys.ready, None, capacity=capacity, reliable=reliable, key_ttl=key_ttl
        )
        self._adopted = False  # whether the stored settings were read
        self._min_idle = float(min_idle)
        self._recovery_options = {"recovery_zset": recovery_zset, "recovery_ttl": recovery_ttl}
        self._recovery_ttl = recovery_ttl
        self._retention = checked_retention("RedisBackend", retention)
        if self._retention.max_age is not None and self._retention.max_age > _LONGEST:
            raise ConfigurationError(
                f"RedisBackend(retention=Retention(max_age={self._retention.max_age!r})): "
                f"Redis keeps a record at most {_LONGEST:.0f} s (a century); use "
                "max_age=None for no age limit"
            )
        self._clock = clock
        self._max_deliveries = max_deliveries
        if (
            isinstance(wait_replicas, bool)
            or not isinstance(wait_replicas, int)
            or (wait_replicas < 0)
        ):
            raise ConfigurationError(
                f"RedisBackend(wait_replicas={wait_replicas!r}): use a whole number of "
                "replicas, at most as many as each master has, or 0 not to wait"
            )
        self._wait_replicas = wait_replicas
        if (
            isinstance(max_connections, bool)
            or not isinstance(max_connections, int)
            or not 1 <= max_connections <= 10_000
        ):
            raise ConfigurationError(
                f"RedisBackend(max_connections={max_connections!r}): use a whole number from "
                "1 to 10000 (connections to each Redis server; 64 by default)"
            )
        self._conn = HiredisConnection(url, self._keys, self._head, max_connections)
        self._metrics = Metrics(self._cached_gauges)
        self._gauges = Gauges()
        # outcomes reported while one batch is in flight share the next round trip
        self._outcomes = Batcher(self._send_outcomes, max_batch=_MAX_OUTCOME_BATCH)
        self._waiters = Waiters()  # finished() calls
        self._events = EventReader(self._waiters, self._read_events, self._await_events)

    def __repr__(self) -> str:
        queue, where = self._keys.ready, self._conn.where  # never the password
        if self._stream is not None:
            stream, group = self._stream.stream, self._stream.group
            return f"<trioqueue.RedisBackend stream={stream!r} group={group!r} url={where!r}>"
        mode = "reliable" if self._settings.reliable else "simple"
        return f"<trioqueue.RedisBackend {mode} queue={queue!r} url={where!r}>"

    async def __aenter__(self) -> Self:
        """Open the client; Redis is first reached by the first call that needs it."""
        await self._conn.open()
        return self

    async def _adopt_settings(self) -> None:
        """Read the queue's stored settings and take them on (see `settings`).

        Raises:
            BackendUnavailable: Redis cannot be reached.
            ConfigurationError: A setting given disagrees with the queue's stored one.
        """
        stored = await self.stored_settings()
        capacity, reliable, key_ttl = self._wanted
        settings = agreed_settings(
            self._keys.ready, stored, capacity=capacity, reliable=reliable, key_ttl=key_ttl
        )
        self._check_mode(settings.reliable)
        self._settings, self._adopted = settings, True

    def _check_mode(self, reliable: bool) -> None:
        """Check the options that depend on the mode, now that the mode is known."""
        if not reliable:
            for name, value in self._recovery_options.items():
                if value is not None:
                    raise ConfigurationError(
                        f"RedisBackend({name}={value!r}): queue {self._keys.ready!r} is a "
                        f"simple queue, which never redelivers, so it has no recovery set; "
                        f"drop {name}"
                    )

    async def __aexit__(self, *exc_info: object) -> None:
        await self._conn.close()

    @property
    def keys(self) -> RedisKeys:
        """Every key this queue uses."""
        return self._keys

    @property
    def settings(self) -> QueueSettings:
        """The queue's shared settings, as read before the first script that may write.

        Before that: the settings given, with the defaults a new queue gets.
        Every script follows the stored settings, so a process keeps working
        when another process changes them with `configure`; this property
        then still shows the old ones.
        """
        return self._settings

    @property
    def reliable(self) -> bool:
        """True for at-least-once delivery with recovery; False for a simple queue."""
        return self._settings.reliable

    @property
    def redelivers(self) -> bool:
        """True in reliable mode (at-least-once); False in simple mode (at-most-once)."""
        return self._settings.reliable

    @property
    def capacity(self) -> int:
        """Most jobs the ready list holds; for a stream source, no limit (a huge number)."""
        return _NO_CAPACITY if self._stream is not None else self._settings.capacity

    @property
    def stream(self) -> StreamSource | None:
        """What a stream source reads (stream, group, consumer); None for a list queue."""
        return self._stream

    @property
    def default_lease(self) -> float:
        """*min_idle*: how long a claim holds without renewal."""
        return self._min_idle

    @property
    def metrics(self) -> Metrics:
        """Counters and histograms of this process; `stats` reads the shared ones."""
        return self._metrics

    def now(self) -> float:
        """The injected clock, else this host's wall clock (close to the server's TIME)."""
        return self._clock() if self._clock is not None else time.time()

    def _cached_gauges(self) -> Gauges:
        return self._gauges

    def _head(self) -> list[str | bytes | float]:
        """The arguments every script takes first (see ``lua/prelude/1-queue.lua``)."""
        retention = self._retention
        capacity, mode, key_ttl = self._settings.script_args()
        return [
            self._keys.job_prefix,
            "" if self._clock is None else repr(self._clock()),
            capacity,
            "" if retention.max_count is None else retention.max_count,
            "" if retention.max_age is None else retention.max_age,
            mode,
            key_ttl,
            self.default_lease,  # how long a silence must be to count as an outage
            *(self._stream.script_args() if self._stream is not None else ("", "", "", "")),
        ]

    async def _run(self, name: str, *args: str | bytes | float) -> Any:
        if not self._adopted and name not in READ_ONLY:
            await self._adopt_settings()  # once, before the first script that may write
        return await self._conn.run(name, *args)

    async def command(self, *args: str | bytes | float) -> Any:
        """Send one Redis command on this backend's connections and return its reply.

        For handlers that talk to the same Redis as their queue: reach it with
        ``await trioqueue.current_redis().command("SET", key, value)`` and the
        command shares the pool's connections, with no client of its own to open.
        The reply is as RESP2 gives it: ``bytes``, ``int``, ``None``, or a list of
        them (``HGETALL`` a flat list of names and values). On a cluster the
        command goes to the node serving its key's slot. Not for
        blocking commands (``BLPOP``, ...): each holds a connection while it waits.

        Cancellation: if cancelled, the command may or may not have run. Its
        connection is not lent again until the pool has read off the reply it
        owes (in a task of its own, off the caller's path), so a reply never
        reaches another caller, and a cancellation costs no new connection.

        Raises:
            BackendUnavailable: Redis cannot be reached, or gave no reply within
                10 seconds (then the command may or may not have run).
            BackendRefused: Redis refused the command; the message is the server's.
        """
        if not args:
            raise TypeError("RedisBackend.command() takes the command and its arguments")
        return await self._conn.command(*args)

    async def _read_events(self, after: str) -> tuple[str, list[str]]:
        """The events after *after* (see `EventReader`)."""
        position, ids = await self._run("events", after)
        return text(position), [text(job_id) for job_id in ids]

    async def _await_events(self, after: str, seconds: float) -> None:
        """Return once the events stream may have an entry after *after*, or *seconds* passed."""
        streams = {self._keys.events: after}
        with trio.move_on_after(seconds + TIMER_SLACK):  # see TIMER_SLACK
            await self._conn.wait_for_entries(streams, seconds)

    async def stored_settings(self) -> QueueSettings | None:
        """The settings stored with the queue now; None when it has none (not created yet).

        Raises:
            BackendUnavailable: Redis cannot be reached.

        Cancellation: a checkpoint; it only reads.
        """
        return decode_settings(await self._run("settings"))

    async def _send_outcomes(self, outcomes: Sequence[tuple[str | bytes, ...]]) -> list[bytes]:
        """Record a batch of outcomes in one script call (see `Batcher`)."""
        return list(await self._run("settle", *[part for group in outcomes for part in group]))
