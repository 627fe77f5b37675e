"""The Redis backend: a reliable list queue shared by many processes and machines.

Jobs wait on a list; a claim moves one into the processing list and records its
lease in a sorted set, in one Lua script; every outcome checks the claim's token,
so an owner whose claim was recovered cannot touch the new owner's job. When the
ready list is empty the fetcher blocks in ``BLMOVE`` and registers what it got
with the same script; the sweeper gives any processing entry without a lease one,
so a crash between the two cannot strand a job.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, Final, Self, final

import trio

from ..._backend import (
    AddMode,
    AddResult,
    CancelResult,
    Claim,
    NewJob,
    Receipt,
    Renewal,
    SweepReport,
    checked_capacity,
    checked_page,
    checked_place,
    checked_retention,
)
from ..._exceptions import (
    BackendUnavailable,
    ConfigurationError,
    IdempotencyConflict,
    JobNotFound,
    QueueFull,
)
from ..._job_input import check_options
from ..._metrics import Gauges, Metrics, MetricsSnapshot, shared_snapshot
from ..._payload import PRIORITIES, decode_payload
from ..._records import ErrorInfo, Job, JobRecord, Retention
from .._waiters import Waiters
from ._batching import Batcher
from ._client import connect
from ._connection import WAIT_NEEDS_GLIDE, decode_record, text
from ._events import EventReader
from ._keys import RedisKeys
from ._queue_info import QueueInfo
from ._queue_settings import QueueSettings, agreed_settings, decode_settings
from ._scripts import READ_ONLY
from ._stream import StreamSource, stream_options

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Callable, Sequence

    from .._waiters import Inbox

__all__ = ["RedisBackend"]

_DEFAULT_RETENTION: Final = Retention()
_REPLICA_WAIT: Final = 2.0  # seconds an enqueue waits for its replicas (wait_replicas)
_WAIT_FOR_ROOM: Final = (0.005, 0.1)  # first and longest pause while enqueue waits for room
# Jobs per add script call: each takes Redis about 5 commands, so a slice stays ~1 ms.
_ADD_SLICE: Final = 500
_MAX_OUTCOME_BATCH: Final = 256  # outcomes recorded in one script call at most
_INJECTED_CLOCK_BLOCK: Final = 10.0  # BLMOVE's own limit, in real seconds, with a test clock
_DEFAULT_MIN_IDLE: Final = 30.0  # the default lease, as `trioqueue worker --min-idle` has it
_NO_CAPACITY: Final = 2**63 - 1  # a stream's: nothing bounds it
_LOOK_AGAIN: Final = 5.0  # seconds a wait for jobs to finish hears nothing, then looks again
_WATCH_SLICE: Final = 1000  # jobs a wait marks in one script call at most


def _until_due(block: float, due_in: bytes) -> float:
    """*block*, cut to *due_in* seconds (the claim script's next due time; empty for none).

    Never below a millisecond: a zero wait would be a wait for ever to BLMOVE.
    """
    if not due_in:
        return block
    return min(block, max(float(due_in), 0.001))


def _options_argument(job: NewJob) -> str:
    """The add script's options argument for *job*: '' or a JSON object of those set."""
    options = {
        key: value
        for key, value in (("a", job.max_attempts), ("t", job.handler_timeout), ("n", job.task))
        if value is not None
    }
    return json.dumps(options, separators=(",", ":")) if options else ""


def _payload(value: bytes | None) -> Any:
    """A claimed job's payload, decoded.

    Raises:
        ValueError: It is missing, or not JSON trioqueue can hold (a record changed
            by hand, or another client's push); the message says which.
    """
    if value is None:
        raise ValueError("no payload (its payload field is missing)")
    try:
        return decode_payload(value)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def _options(value: bytes) -> tuple[int | None, float | None, str | None]:
    """A claimed job's max_attempts, handler_timeout and task (`_options_argument`).

    Raises:
        ValueError: The field is not what trioqueue writes (a record changed by hand).
    """
    if not value:
        return None, None, None
    try:
        options = json.loads(value)
    except (ValueError, RecursionError):
        raise ValueError("bad options (its options field is not JSON)") from None
    if not isinstance(options, dict):
        raise ValueError("bad options (its options field is not a JSON object)")
    found = options.get("a"), options.get("t"), options.get("n")
    try:
        check_options(*found)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"bad options (its options field holds max_attempts {found[0]!r}, "
            f"handler_timeout {found[1]!r}, task {found[2]!r}: {exc})"
        ) from None
    return found


def _whole(value: bytes | None) -> int:
    """A count read from Redis; 0 if missing or not a number (a record changed by hand)."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _seconds_or_zero(value: bytes | None) -> float:
    """A time read from Redis; 0.0 if missing, not a number, or not finite."""
    try:
        seconds = float(value or 0)
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) else 0.0


_SHORTEST: Final = 0.001  # Redis keeps its timers in milliseconds
_LONGEST: Final = 100 * 365 * 24 * 3600.0  # a century: every timer script stays exact


def _seconds(name: str, value: float | None, *, allow_none: bool = True) -> None:
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


@final
class RedisBackend:
    """Jobs in Redis, shared by every process that names the same queue.

    Use it as an async context manager, which opens the connection::

        async with trioqueue.RedisBackend(
            "redis://localhost:6379/0", queue="{mail}", min_idle=30
        ) as backend:
            ...

    Reliable mode (the default): a job leaves Redis only after its handler is
    done with it (at-least-once). Claims are leased for *min_idle* seconds and
    renewed by the pool that holds them; the sweeper puts back claims whose
    owner stopped renewing them (a crashed process), so *min_idle* bounds how
    long a crash delays a job, not how long a handler may run.

    Cancellation: as the `Backend` protocol says. Each call is one Lua script,
    atomic on the server, unless it says it goes in slices (the outcomes of
    calls made at the same moment share one script); a script sent is waited
    for (at most the I/O timeout), so a cancellation never hides a change, and
    one that comes first leaves everything as it was.

    Simple mode (``reliable=False``): a claim takes the job off the queue, and
    an interrupted handler is never run again (at-most-once), for handlers
    whose side effects must not repeat. A job whose worker dies while holding
    it becomes a dead letter once its lease runs out, and one whose handler a
    pool's shutdown cancelled becomes one at once; their reasons say so, and
    you can inspect or requeue them by hand. A handler that raises is still
    retried by the pool's `RetryPolicy` (``max_attempts=1`` for one attempt).

    Args:
        url: ``redis://host:port/db``.
        queue: The ready list's key; all the queue's keys derive from it. Any
            name works on a single server (``"cache.warmups"``); on a Redis
            Cluster the keys must share one slot, so give it a hash tag
            (``"{mail}"``), or the first call raises `ConfigurationError`
            naming the tag.
        capacity: Most jobs on the ready list; `Queue.enqueue` waits beyond it.
            *capacity*, *reliable* and *key_ttl* are the queue's shared
            settings (`settings`): every user of a queue follows the ones
            stored with it, so leave them as None to follow the queue's (a new
            queue gets 1000, reliable and no key TTL); a value given that
            disagrees with the stored one is refused (`ConfigurationError`)
            before anything is written (reading stats needs no agreement).
            `configure` changes them.
        min_idle: Seconds a claim stays valid without renewal (the lease).
            Workers renew their claims, so this bounds how long a crash delays a
            job, not how long a handler may run. Required to claim from a
            reliable queue or a stream (seed 001: a recovery set needs it; the
            first claim without it raises `ConfigurationError`); producers and
            views need none. In simple mode, how long a crashed worker's job
            waits before it becomes a dead letter; None there is 30 s, the
            default of ``trioqueue worker --min-idle``.
        recovery_ttl: Seconds an abandoned queue's claims set lives; must
            exceed *min_idle*. None keeps it until the claims are recovered.
        retention: How long finished records are kept (count and age).
        processing: The processing list's key (default ``<queue>.processing``).
        recovery_zset: The claims sorted set's key (default ``<queue>.claims``).
        clock: None to use the Redis server's clock (the default: hosts need
            no clock agreement). Tests pass ``trio.current_time`` to run the
            scripts on a mock clock. Claims take the same path either way; only
            the wait in ``BLMOVE``, which the server times on its real clock, is
            ended by a cancellation on Trio's clock instead.
        reliable: True for at-least-once delivery with recovery (a new
            queue's default), False for a simple, at-most-once queue.
        key_ttl: Seconds an unfed queue lives; a new queue without one lives
            for ever. Opt-in, because it loses jobs on purpose: every enqueue
            keeps the queue alive *key_ttl* seconds more, with every job
            waiting in it (a queue that is used never expires, as seed 001
            says), and a queue nobody fed for that long disappears with the
            jobs left in it; their records may linger up to *key_ttl* more,
            run by nothing. Claimed jobs and dead letters
            never expire, nor do the counters and the claim-token sequence
            (two small keys); finished records follow the retention, else
            expire after *key_ttl* too.
        max_deliveries: Most times one job may be delivered without an
            outcome (to a worker that died, or lost its lease); the next claim
            dead-letters it instead, with the reason. This stops a poison job
            whose handler kills its worker from killing workers for ever. An
            attempt that failed and was retried is no such delivery, so a job's
            own *max_attempts* may be higher. None for no limit. Jobs a clean
            shutdown put back do not count.
        wait_replicas: After each enqueue, wait (Redis ``WAIT``, at most
            2 seconds) until this many replicas have the jobs, so
            that a failover to a replica cannot lose an enqueue it acknowledged
            (Redis replicates after it replies). Fewer in time raises
            `BackendUnavailable`: the jobs are stored, not yet copied; enqueue
            them again with the same ids. 0 (the default) does not wait.
        stream: Read jobs from this Redis stream instead of a list (a stream
            source; give it instead of *queue*). Every consumer group reading
            the stream gets every entry, and keeps its own claims, records and
            dead letters under ``<stream>:<group>``. An entry another program
            added (``XADD uploads * image cat.png``) is a job whose id is the
            entry's and whose payload is its fields as an object of strings.
            `Queue.enqueue` adds entries too (fields ``id``, ``payload``,
            ``hash``); it never trims the stream (``MAXLEN`` would drop entries
            a group has not read yet) and never waits: a stream has no
            capacity. Idempotency by id is kept by the group the producer's
            backend names. On a Redis Cluster give the stream a hash tag
            (``"{uploads}"``).
        group: The consumer group to read the stream through (required with
            *stream*); created if missing, from *start*.
        start: Where a group created here begins: ``"$"`` (the default: entries
            added from then on; `Queue.enqueue` creates the group before it adds
            its first entry, so none of its jobs is missed) or ``"0"`` (the
            whole stream).
        consumer: This backend's consumer name in the group; None for one of
            its own (host, process id, random), which is what you want: two
            processes must never share one.
        delete_done: Delete a finished job's entry (``XDEL``) as well as
            acknowledge it (``XACK``); only when no other group reads the stream.

    Raises:
        ConfigurationError: A setting is out of range; the message says what
            to change.
    """

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
        _seconds("min_idle", min_idle)
        _seconds("recovery_ttl", recovery_ttl)
        _seconds("key_ttl", key_ttl)
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
        self._conn = connect(url, self._keys, self._head, wait_replicas=bool(wait_replicas))
        if self._wait_replicas and not self._conn.can_wait_replicas:
            raise ConfigurationError(WAIT_NEEDS_GLIDE)
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

    # --- plumbing ---------------------------------------------------------------------

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
        """The arguments every script takes first (see ``lua/prelude.lua``)."""
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

    # --- producer side ----------------------------------------------------------------

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job*; see `Backend.add`. Waiting for room polls with a short backoff."""
        (result,) = await self.add_many([job], mode)
        if isinstance(result, Exception):
            raise result
        return result

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept *jobs* in order; see `Backend.add_many`.

        One script call per slice of 500 jobs; waiting for room polls with
        a short backoff, and sends again only the jobs not handled yet.
        """
        if not jobs:
            await trio.lowlevel.checkpoint()
            return []
        if self._stream is not None and any(j.delay is not None or j.at is not None for j in jobs):
            raise ValueError(
                f"stream {self._stream.stream!r}: a stream source cannot hold a job until a due "
                "time (XADD has none, and every group reads the entry at once); enqueue "
                "delayed jobs to a list queue (RedisBackend(url, queue=...))"
            )
        if self._stream is not None and any(j.priority for j in jobs):
            raise ValueError(
                f"stream {self._stream.stream!r}: a stream source has no priorities (every "
                "group reads its entries in stream order); enqueue prioritised jobs to a list "
                "queue (RedisBackend(url, queue=...)), or leave priority= at 0"
            )
        results: list[AddResult] = []
        pause = _WAIT_FOR_ROOM[0]
        while len(results) < len(jobs):
            chunk = jobs[len(results) : len(results) + _ADD_SLICE]
            args = [
                field
                for job in chunk
                for field in (
                    job.id,
                    job.encoded,
                    job.payload_hash,
                    self._due_argument(job),
                    _options_argument(job),
                    str(job.priority) if job.priority else "",
                )
            ]
            reply = await self._run("add", mode.value, *args)
            await self._replicated(len(results), len(chunk))
            full = False
            for job, status, detail in zip(chunk, reply[::2], reply[1::2], strict=False):
                if status == b"full" and mode is AddMode.WAIT:
                    full = True  # the script stopped here: this job and the rest wait
                    break
                results.append(self._add_result(job, status, detail))
            if full:
                await trio.sleep(pause)  # nothing of the rest accepted if cancelled here
                pause = min(pause * 2, _WAIT_FOR_ROOM[1])
            else:
                pause = _WAIT_FOR_ROOM[0]
        return results

    def _due_argument(self, job: NewJob) -> str:
        """The add script's due-time argument for *job* ('' for ready at once).

        A delay counts on the server's clock; so does an *at*, unless this backend
        runs on an injected clock (tests): then *at* is made a delay here.
        """
        if job.delay is not None:
            return f"d{job.delay!r}"
        if job.at is None:
            return ""
        if self._clock is not None:
            return f"d{job.at - time.time()!r}"
        return f"a{job.at!r}"

    async def _replicated(self, done: int, sent: int) -> None:
        """Wait until `wait_replicas` replicas have what the last add script wrote.

        Not cancellable (at most 2 seconds): the jobs are stored already, and an
        enqueue that raises `trio.Cancelled` must have accepted nothing.

        Raises:
            BackendUnavailable: Fewer had it within 2 seconds.
        """
        wanted = self._wait_replicas
        if not wanted:
            return
        with trio.CancelScope(shield=True):
            reached = await self._conn.wait_replicas(wanted, _REPLICA_WAIT)
        if reached < wanted:
            raise BackendUnavailable(
                self._conn.where,
                f"jobs {done + 1}-{done + sent} of this call were stored, but only {reached} "
                f"of the {wanted} replicas asked for (wait_replicas) had them after "
                f"{_REPLICA_WAIT:g} s",
                advice="enqueue them again with the same ids once the replicas are back "
                "(jobs given no id would be enqueued twice)",
            )

    def _add_result(self, job: NewJob, status: bytes, detail: bytes) -> AddResult:
        """One job's reply from the add script, counted in this process's metrics."""
        if status in (b"new", b"dup"):
            fresh = status == b"new"
            if fresh:
                self._metrics.enqueued += 1
            else:
                self._metrics.deduplicated += 1
            return Receipt(
                id=job.id, deduplicated=not fresh, queued=detail == b"1", scheduled=detail == b"s"
            )
        if status == b"conflict":
            self._metrics.conflicts += 1
            return IdempotencyConflict(job.id, text(detail), job.payload_hash)
        return QueueFull(int(detail))  # the queue's capacity now, maybe configured anew

    async def command(self, *args: str | bytes | float) -> Any:
        """Send one Redis command on this backend's connections and return its reply.

        For handlers that talk to the same Redis as their queue: reach it with
        ``await trioqueue.current_redis().command("SET", key, value)`` and the
        command shares the pool's connections, with no client of its own to open.
        On the default client (hiredis) the reply is as RESP2 gives it: ``bytes``,
        ``int``, ``None``, or a list of them (``HGETALL`` a flat list of names and
        values); on valkey-glide (``wait_replicas``), as glide gives it. On a
        cluster the command goes to the node serving its key's slot. Not for
        blocking commands (``BLPOP``, ...): each holds a connection while it waits.

        Cancellation: if cancelled, the command may or may not have run (its
        connection is closed, never reused mid-reply).

        Raises:
            BackendUnavailable: Redis cannot be reached, or gave no reply within
                10 seconds (then the command may or may not have run).
            BackendRefused: Redis refused the command; the message is the server's.
        """
        if not args:
            raise TypeError("RedisBackend.command() takes the command and its arguments")
        return await self._conn.command(*args)

    async def status(self, job_id: str) -> JobRecord | None:
        """The record of *job_id*, or None if unknown or evicted."""
        fields = await self._conn.hash(self._keys.job_prefix + job_id)
        return decode_record(job_id, fields) if fields else None

    @trio.as_safe_channel
    async def finished(
        self, job_ids: Sequence[str]
    ) -> AsyncGenerator[tuple[str, JobRecord | None], None]:
        """Each of *job_ids* with its record as it finishes; see `Backend.finished`.

        No polling: the ids are marked on their records as waited for, and a
        marked job puts its id on the queue's events stream when it finishes
        (``<queue>.events``, the newest 10,000 or so kept). One waiter of this
        process at a time reads that stream for all of them (``XREAD BLOCK``, on
        one connection), so waits cost Redis one event per finished job that
        someone waits for, and nothing for the others. A wait that hears nothing
        for 5 seconds looks at its jobs again, in case an event was
        lost (a Redis restart) or trimmed.
        """
        ids = list(dict.fromkeys(job_ids))
        inbox = self._waiters.open(ids)
        try:
            await self._events.ready()  # before any job is marked: no event comes before
            look_at = ids
            while True:
                for pair in await self._look(inbox, look_at):
                    yield pair
                if not inbox.waiting:
                    return
                if await self._events.wait(inbox, _LOOK_AGAIN):
                    look_at = inbox.take()
                else:
                    look_at = list(inbox.waiting)
        finally:
            self._waiters.close(inbox)
            if not self._waiters:
                self._events.idle()

    async def _look(self, inbox: Inbox, job_ids: list[str]) -> list[tuple[str, JobRecord | None]]:
        """Which of *job_ids* are finished (with their records); mark the others."""
        ended: list[tuple[str, JobRecord | None]] = []
        job_ids = [job_id for job_id in job_ids if job_id in inbox.waiting]
        for start in range(0, len(job_ids), _WATCH_SLICE):
            part = job_ids[start : start + _WATCH_SLICE]
            states = [int(n) for n in await self._run("watch", *part)]
            done = [job_id for job_id, n in zip(part, states, strict=True) if n == 1]
            found = await self._conn.hashes([self._keys.job_prefix + job_id for job_id in done])
            records = dict(zip(done, found, strict=True))
            for job_id, state in zip(part, states, strict=True):
                if state == 2:
                    continue  # marked: its event will come
                fields = records.get(job_id)
                # gone since (the retention forgot it): unknown, as one never enqueued
                ended.append((job_id, decode_record(job_id, fields) if fields else None))
                self._waiters.done(inbox, job_id)
        return ended

    async def _read_events(self, after: str) -> tuple[str, list[str]]:
        """The events after *after* (see `EventReader`)."""
        position, ids = await self._run("events", after)
        return text(position), [text(job_id) for job_id in ids]

    async def _await_events(self, after: str, seconds: float) -> None:
        """Return once the events stream may have an entry after *after*, or *seconds* passed."""
        streams = {self._keys.events: after}
        if self._clock is None:  # the server's timer, which a cancellation ends at once
            await self._conn.wait_for_entries(streams, seconds)
        else:  # a test clock: the wait ends on Trio's
            with trio.move_on_after(seconds):
                await self._conn.wait_for_entries(streams, _INJECTED_CLOCK_BLOCK)

    async def pending(self) -> int:
        """Jobs accepted and not finished: ready, stored, or claimed."""
        return int(await self._run("pending"))

    async def job_ids(self, place: str, *, limit: int = 100) -> list[str]:
        """The ids of up to *limit* jobs in *place*; see `Backend.job_ids`."""
        checked_place(place, limit)
        return [text(job_id) for job_id in await self._run("job_ids", place, limit)]

    async def dead_letters(self, *, offset: int = 0, limit: int | None = None) -> list[JobRecord]:
        """The dead letters, oldest first; see `Backend.dead_letters`."""
        offset, limit = checked_page(offset, limit)
        # the list's head is its newest: the oldest first are read from its tail
        stop = -1 - offset
        start = 0 if limit is None else stop - limit + 1
        if limit == 0:
            return []
        ids = [text(i) for i in reversed(await self._conn.list_items(self._keys.dead, start, stop))]
        found = await self._conn.hashes([self._keys.job_prefix + job_id for job_id in ids])
        return [
            decode_record(job_id, fields)
            for job_id, fields in zip(ids, found, strict=True)
            if fields
        ]

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

    async def stats(self) -> MetricsSnapshot:
        """The queue's shared counters and its true gauges, with this process's histograms."""
        counters, gauges, levels = await self._run("stats")
        values = {text(k): int(v) for k, v in zip(counters[::2], counters[1::2], strict=True)}
        depth, unqueued, inflight, retrying, dead, scheduled = (int(g) for g in gauges)
        self._gauges = Gauges(
            queue_depth=depth,
            backlog=depth + unqueued,
            inflight=inflight,
            retry_waiting=retrying,
            dead=dead,
            scheduled=scheduled,
            ready_by_priority=dict(zip(PRIORITIES, (int(n) for n in levels), strict=True)),
        )
        return shared_snapshot(values, self._gauges, self._metrics.snapshot())

    async def stored_settings(self) -> QueueSettings | None:
        """The settings stored with the queue now; None when it has none (not created yet).

        Raises:
            BackendUnavailable: Redis cannot be reached.

        Cancellation: a checkpoint; it only reads.
        """
        return decode_settings(await self._run("settings"))

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
        _seconds("key_ttl", key_ttl)
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

    async def inspect(self) -> QueueInfo:
        """What the queue holds in Redis now, for operators (``trioqueue stats``).

        Cancellation: a checkpoint; it only reads.
        """
        reply = await self._run("inspect")
        ready, stored, processing, claims, oldest, dead, finished, scheduled = reply
        return QueueInfo(
            ready=int(ready),
            stored=int(stored),
            processing=int(processing),
            claims=int(claims),
            oldest_claim_age=float(oldest) if oldest else None,
            dead=int(dead),
            finished_kept=int(finished),
            scheduled=int(scheduled),
        )

    # --- worker side ------------------------------------------------------------------

    async def _claims(self, rows: list[list[bytes]]) -> list[Claim]:
        """Turn claimed rows into claims; dead-letter the ones Python cannot decode.

        Lua's cjson accepts a few things Python's json does not (``nan``, hex
        numbers, invalid UTF-8 in strings, nesting deeper than `MAX_DEPTH`); such
        a job must not crash the pool: it becomes a dead letter with the reason.
        """
        claims = []
        for job_id, payload, attempts, token, ready_at, suspect, options, priority in rows:
            job_attempt = _whole(attempts) + 1
            at = _seconds_or_zero(ready_at)
            try:
                decoded = _payload(payload)
                max_attempts, timeout, task = _options(options)
            except ValueError as exc:
                job = Job(id=text(job_id), payload=None, attempt=job_attempt)
                poison = Claim(job=job, token=text(token), ready_at=at)
                await self._settle(poison, "dead", None, f"undecodable record: {exc}")
                continue
            job = Job(
                id=text(job_id),
                payload=decoded,
                attempt=job_attempt,
                max_attempts=max_attempts,
                handler_timeout=timeout,
                task=task,
                priority=_whole(priority),
            )
            claims.append(Claim(job=job, token=text(token), ready_at=at, suspect=suspect == b"1"))
        return claims

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
        """Claim up to *max_jobs* ready jobs, at most 100 a call; see `Backend.claim`.

        One script claims at most 100 jobs, so a large claim never holds Redis
        for long; ask again for more. Blocks in ``BLMOVE`` for up to *block*
        seconds when the list is empty. A cancellation ends that wait at once,
        and a job it moved meanwhile goes back to the front of the queue: a
        claim is either registered or never made.

        A stream source claims jobs to deliver again first, then new entries;
        with none, it waits up to *block* seconds for a new entry or a job given
        back (``XREAD BLOCK`` on the stream and the group's wake stream, which
        takes nothing: a cancelled wait changes nothing), and claims again.
        """
        if not self._min_idle_given and self.redelivers:
            raise ConfigurationError(
                f"RedisBackend(queue={self._keys.ready!r}) claims from a reliable queue, "
                "whose claims go to a recovery set, and with a recovery set min_idle is "
                "required: give min_idle=SECONDS, how long a crashed worker's jobs wait "
                "before another worker takes them (trioqueue worker --min-idle defaults to 30)"
            )
        if self._stream is not None:
            return await self._claim_from_stream(self._stream, max_jobs, lease, block)
        ttl, limit = self._claim_limits()
        ready, processing = self._keys.ready, self._keys.processing
        deadline = trio.current_time() + block
        moved: tuple[bytes, ...] = ()
        while True:
            # A claim made must reach the caller: cancellable before the script is sent,
            # not after, nor when it registers what BLMOVE moved (that would sit unclaimed).
            if not moved:
                await trio.lowlevel.checkpoint_if_cancelled()
            with trio.CancelScope(shield=True):
                rows, due_in = await self._run("claim", max_jobs, lease, ttl, limit, *moved)
                claims = await self._claims(rows)
            left = deadline - trio.current_time()
            if claims or left <= 0:
                return claims
            # no longer than until the next delayed job is due: then it is claimable
            # (a delayed job enqueued meanwhile, due sooner, sends a wake element)
            wait = _until_due(left, due_in)
            # cancellable at once: a cancelled wait puts back what it moved (see blmove)
            if self._clock is None and not due_in:
                element = await self._conn.blmove(ready, processing, wait)
            elif self._clock is None:
                # a due time is kept on this clock: Redis notices a BLMOVE's timeout only
                # when its event loop wakes (every 100 ms on an idle server at hz 10)
                element = None
                with trio.move_on_after(wait):
                    element = await self._conn.blmove(ready, processing, left)
            else:
                # the server waits on the real clock, Trio's may be a mock one: the wait
                # ends on Trio's clock, by the same cancellation that stops a pool
                element = None
                with trio.move_on_after(wait):
                    element = await self._conn.blmove(ready, processing, _INJECTED_CLOCK_BLOCK)
            if element is None and not due_in:
                return []  # the block ran out, and nothing is stored to come due
            moved = () if element is None else (element,)

    def _claim_limits(self) -> tuple[float | str, int | str]:
        """The claim script's claims-set lifetime and delivery limit ('' for none)."""
        ttl = "" if self._recovery_ttl is None else self._recovery_ttl
        limit = "" if self._max_deliveries is None else self._max_deliveries
        return ttl, limit

    async def _claim_from_stream(
        self, source: StreamSource, max_jobs: int, lease: float, block: float
    ) -> list[Claim]:
        """`claim` for a stream source (see there)."""
        ttl, limit = self._claim_limits()
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):  # a claim made must reach the caller
            rows, after, woken, due_in = await self._run("claim", max_jobs, lease, ttl, limit)
            claims = await self._claims(rows)
        if rows or block <= 0:  # rows that were all dead-lettered end the call too
            return claims
        block = _until_due(block, due_in)
        # the server waits on the real clock; with a test clock the wait ends on Trio's
        wait = block if self._clock is None else _INJECTED_CLOCK_BLOCK
        with trio.move_on_after(block):
            await self._conn.wait_for_entries(
                {source.stream: text(after), self._keys.wake: text(woken)}, wait
            )
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):
            rows, _, _, _ = await self._run("claim", max_jobs, lease, ttl, limit)
            claims = await self._claims(rows)
        return claims

    async def renew(self, claims: Sequence[Claim], *, lease: float) -> Renewal:
        """Extend the leases of the claims still held; those lost, and those cancelled."""
        pairs = [part for claim in claims for part in (claim.job.id, claim.token)]
        if not pairs:
            await trio.lowlevel.checkpoint()  # a checkpoint, as every call is
            return Renewal()
        ttl = "" if self._recovery_ttl is None else self._recovery_ttl
        lost, cancel = await self._run("renew", lease, ttl, *pairs)
        return Renewal(
            lost=frozenset(text(token) for token in lost),
            cancel=frozenset(text(token) for token in cancel),
        )

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job *job_id*, at once or through its pool; see `Backend.cancel`.

        A waiting job leaves the ready list with ``LREM``, which reads the list: a
        cancel costs time in the length of the queue, about a millisecond per
        100,000 jobs waiting.
        """
        answer = text(await self._run("cancel", job_id))
        if answer == "unknown":
            raise JobNotFound(job_id)
        return CancelResult(answer)

    async def cancel_claim(self, claim: Claim) -> bool:
        """End a claim whose job was cancelled; False if the claim is stale."""
        return await self._settle(claim, "cancel")

    async def _send_outcomes(self, outcomes: Sequence[tuple[str | bytes, ...]]) -> list[bytes]:
        """Record a batch of outcomes in one script call (see `Batcher`)."""
        return list(await self._run("settle", *[part for group in outcomes for part in group]))

    async def _settle(
        self, claim: Claim, kind: str, error: ErrorInfo | None = None, reason: str | bytes = ""
    ) -> bool:
        age = await self._outcomes.submit(
            (
                claim.job.id,
                claim.token,
                kind,
                error.type if error else "",
                error.message if error else "",
                reason,
                error.traceback if error else "",
            )
        )
        local = self._metrics
        if not age:
            local.stale += 1
            return False
        if kind == "cancel":
            local.cancelled += 1
        elif kind != "requeue":
            local.processed += 1
            local.failed += error is not None and error.type != ""
        if kind == "ack":
            local.succeeded += 1
            local.end_to_end.observe(float(age))
        elif kind == "retry":
            local.retries += 1
        elif kind == "dead":
            local.dead_lettered += 1
        elif kind == "drop":
            local.dropped += 1
        return True

    async def ack(
        self, claim: Claim, result: bytes | None = None, *, result_error: str | None = None
    ) -> bool:
        """Complete the job, keeping *result* on its record; False if the claim is stale."""
        if result is None and result_error is None:
            return await self._settle(claim, "ack")
        # settle.lua takes the result in the reason slot, why it is missing in the message's
        missing = None if result_error is None else ErrorInfo("", result_error)
        return await self._settle(claim, "ack", missing, "" if result is None else result)

    async def retry_later(
        self, claim: Claim, error: ErrorInfo | None, *, delay: float = 0.0
    ) -> bool:
        """End an attempt that will be retried; the claim keeps the job.

        The next attempt is due *delay* seconds from now on the server's clock (see
        `Backend.retry_later`).
        """
        # the outcome's reason slot carries the delay: a retry has no reason
        return await self._settle(claim, "retry", error, repr(float(delay)))

    async def requeue(self, claim: Claim) -> bool:
        """Put a job waiting to retry back on the queue."""
        return await self._settle(claim, "requeue")

    async def dead_letter(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """End the last attempt and keep the job as a dead letter."""
        return await self._settle(claim, "dead", error, reason)

    async def drop(self, claim: Claim, reason: str) -> bool:
        """End the attempt and drop the job."""
        return await self._settle(claim, "drop", None, reason)

    async def release(self, claims: Sequence[Claim]) -> int:
        """Put unfinished claims back at once; return how many were still held."""
        pairs = [part for claim in claims for part in (claim.job.id, claim.token)]
        if not pairs:
            await trio.lowlevel.checkpoint()  # a checkpoint, as every call is
            return 0
        released = int(await self._run("release", *pairs))
        self._metrics.released += released
        return released

    async def sweep(self) -> SweepReport:
        """Recover expired claims, stamp unregistered ones, schedule, evict; see `Backend.sweep`.

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
