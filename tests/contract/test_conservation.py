"""The conservation law, checked after every step of random operations; every job's fate.

``enqueued + dead_requeued == succeeded + dead_lettered + dropped + held`` holds at
every quiescent point, counters never decrease, and every gauge equals the count
read off the job records. Up to two pools run at once, each with its own prefetch,
batch size and handler timeout; a pool can lose its link to the backend long enough
for its leases to run out (the other pool's sweeper recovers its claims, and its late
outcomes are fenced out); dead letters are requeued and purged; finished records are
evicted; producers waiting for room are cancelled.

After the final drain, every job's record must be what its payload told the handler
to do, given the retry policy and the pools that ran it.
"""

from __future__ import annotations

import collections
import inspect
from typing import TYPE_CHECKING, Any, Final

import attrs
import pytest
import trio
import trio.testing
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import trioqueue
from trioqueue import (
    PRIORITIES,
    BackendUnavailable,
    CancelResult,
    IdempotencyConflict,
    JobNotFound,
    JobState,
    Queue,
    QueueFull,
    Retention,
    RetryPolicy,
)
from trioqueue._metrics import COUNTER_NAMES
from trioqueue._records import TERMINAL_STATES

from ..conftest import JUMP_AFTER
from ..trio_thread import TrioThread

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


# What a job's handler does, chosen by its payload: "slow" sleeps SLOW seconds, "hang"
# waits until a step opens the gate.
BEHAVIOURS = ("ok", "fail_once", "always_fail", "drop", "retry_once", "slow", "hang")
SLOW: Final = 3.0
# two attempts: always_fail becomes a dead letter soon enough to requeue and purge it
RETRY: Final = RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=1.0)
# Every pool's lease. A pool renews every third of it, and the clock never jumps more
# than 5 s at once: a live pool's leases never run out, only a cut-off pool's do.
LEASE: Final = 10.0

ids = st.sampled_from([f"j{i}" for i in range(12)])
# "p": the job's priority (a stream source, which has none, enqueues every job at 0)
payloads = st.fixed_dictionaries(
    {"do": st.sampled_from(BEHAVIOURS), "v": st.integers(0, 2), "p": st.sampled_from(PRIORITIES)}
)
pool_settings = st.fixed_dictionaries(
    {
        "workers": st.integers(1, 3),
        "prefetch": st.sampled_from([0, 1, 3]),
        "batch_size": st.sampled_from([1, 2, 32]),
        # below SLOW a slow job always times out; at 30 s, 27 s beyond a slow job's
        # end, only a hung one does: on a loaded machine several of the steps' jumps
        # (5 s at most) may come before a woken handler runs, and at 8 s two did
        "handler_timeout": st.sampled_from([None, None, 2.0, 30.0]),
        # longer than a lease: an outcome the pool keeps retrying through a cut link
        # lands after its claim was recovered, and must be fenced out
        "io_timeout": st.sampled_from([5.0, 15.0]),
    }
)
# None: the backend's default (10,000 records, nothing evicted in a run)
retentions = st.sampled_from([None, None, Retention(max_count=2), Retention(max_age=20.0)])

# Examples per run, as a share of the profile's max_examples (tests/conftest.py: 100
# locally, 200 with HYPOTHESIS_PROFILE=ci): a Redis step also waits for 20 ms of real
# quiet after every step, so Redis gets fewer.
SHARE: Final = {
    "memory": 1.0,
    "redis": 0.15,
    "redis-simple": 0.15,
    "redis-cluster": 0.1,
    "redis-stream": 0.05,  # the list's machinery after the claim: fewer examples
}
STEPS: Final = 35
# Each backend's examples are split between this many tests, each with a random seed of
# its own: the same number of examples in all, but parallel test processes share them
# instead of one process running them all after the others have finished (a Redis run
# is mostly waiting on real quiet, so shards side by side cost little CPU).
SHARDS: Final = 4


class Link:
    """A pool's way to the shared backend, which a step can cut: a network partition.

    While cut, every call raises `BackendUnavailable`, as a lost connection does: the
    pool's renewals, sweeps, claims and outcomes fail, and the pool retries them.
    """

    def __init__(self, backend: trioqueue.Backend) -> None:
        self._backend = backend
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._backend, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute  # properties, now()

        async def call(*args: Any, **kwargs: Any) -> Any:
            await trio.lowlevel.checkpoint()
            if self.cut:
                raise BackendUnavailable("the test's link", "cut by freeze_a_pool")
            return await attribute(*args, **kwargs)

        return call


@attrs.frozen
class Run:
    """One call of the handler, as the handler saw it."""

    payload: Any
    attempt: int
    timeout: float | None  # the handler_timeout of the pool that called it
    link: Link | None  # the pool's (None: the final drain's)
    priority: int  # the job's, as its claim carried it


@attrs.define(eq=False)
class Running:
    """A pool the machine started and has not shut down."""

    pool: trioqueue.WorkerPool
    link: Link
    workers: int
    io_timeout: float
    frozen: bool = False  # may hold claims the backend took back


@attrs.define(eq=False)
class Expected:
    """The model of one accepted job."""

    payload: Any
    # claimed by a pool whose leases ran out: a simple queue dead-letters such a job
    exposed: bool = False
    seen: JobState | None = None  # its state when a step last looked
    cancel_asked: bool = False  # a step cancelled it (queue.cancel)


def told(do: str, attempt: int, timeout: float | None) -> set[str]:
    """What one handler run ends with: ok, fail, timeout, retry or drop."""
    if do == "slow":
        return {"timeout" if timeout is not None and timeout < SLOW else "ok"}
    if do == "hang":  # runs until the gate opens, unless its timeout comes first
        return {"ok"} if timeout is None else {"ok", "timeout"}
    if do == "always_fail" or (do == "fail_once" and attempt == 1):
        return {"fail"}
    if do == "drop":
        return {"drop"}
    if do == "retry_once" and attempt == 1:
        return {"retry"}
    return {"ok"}


AGAIN: Final = frozenset({"fail", "timeout", "retry"})  # outcomes that want another attempt
ERROR_TYPE: Final = {"fail": "RuntimeError", "timeout": "TimeoutError"}


class ConservationMachine(RuleBasedStateMachine):
    make_backend: Callable[..., Awaitable[trioqueue.Backend]]

    def __init__(self) -> None:
        super().__init__()
        kind = type(self).make_backend.kind
        self.redelivers: bool = type(self).make_backend.redelivers
        self.loop = TrioThread(cushion=JUMP_AFTER[kind])
        self.pools: list[Running] = []
        self.jobs: dict[str, Expected] = {}  # the model: id -> the live incarnation
        self.runs: dict[str, list[Run]] = collections.defaultdict(list)
        self.accepted = 0  # new jobs accepted, by every rule
        self.purged = 0
        self.producing = 0  # producers still waiting for room in the background
        self.no_producers = trio.Event()
        self.no_producers.set()
        self.froze = False  # a pool was frozen
        self.recovered = 0  # claims recovered, as of the last freeze
        self.gate = trio.Event()  # "hang" handlers wait for it
        self.previous: trioqueue.MetricsSnapshot | None = None

    @initialize(
        capacity=st.integers(1, 4),
        retention=retentions,
        config=pool_settings,
    )
    def start(self, capacity: int, retention: Retention | None, config: dict[str, Any]) -> None:
        self.retention = retention
        self.backend = self.loop.run(type(self).make_backend, capacity, retention)
        self.capacity = self.backend.capacity  # a stream source's: no limit
        self.queue = Queue(self.backend)
        self.start_pool(config)

    # --- the handler ------------------------------------------------------------------

    def handler_for(self, timeout: float | None, link: Link | None) -> trioqueue.Handler:
        async def handler(job: trioqueue.Job) -> None:
            self.runs[job.id].append(Run(job.payload, job.attempt, timeout, link, job.priority))
            do = job.payload["do"]
            if do == "slow":
                await trio.sleep(SLOW)
            elif do == "hang":
                await self.gate.wait()
            elif do == "always_fail" or (do == "fail_once" and job.attempt == 1):
                raise RuntimeError(f"{do} on attempt {job.attempt}")
            elif do == "drop":
                raise trioqueue.Drop("dropped on purpose")
            elif do == "retry_once" and job.attempt == 1:
                raise trioqueue.Retry(delay=1.5)

        return handler

    # --- pools --------------------------------------------------------------------------

    @precondition(lambda self: len(self.pools) < 2)
    @rule(config=pool_settings)
    def start_pool(self, config: dict[str, Any]) -> None:
        link = Link(self.backend)

        async def run_pool(task_status: trio.TaskStatus[trioqueue.WorkerPool]) -> None:
            async with trioqueue.open_worker_pool(
                link,  # type: ignore[arg-type]
                self.handler_for(config["handler_timeout"], link),
                retry=RETRY,
                seed=0,
                lease=LEASE,
                **config,
            ) as pool:
                task_status.started(pool)
                await pool.wait_stopped()

        async def start() -> trioqueue.WorkerPool:
            return await self.loop.nursery.start(run_pool)

        pool = self.loop.run(start)
        self.pools.append(Running(pool, link, config["workers"], config["io_timeout"]))

    @precondition(lambda self: self.pools)
    @rule(which=st.integers(0, 1), grace=st.sampled_from([0.0, 1.0, 4.0]))
    def shut_down(self, which: int, grace: float) -> None:
        running = self.pools[which % len(self.pools)]

        async def shutdown() -> trioqueue.ShutdownReport:
            self.loop.clock.autojump_threshold = self.loop.cushion
            try:
                with trio.fail_after(grace + running.io_timeout + 1):
                    return await running.pool.shutdown(grace)
            finally:
                self.loop.clock.autojump_threshold = float("inf")

        report = self.loop.run(shutdown)
        assert report.finished + report.cancelled <= running.workers
        self.pools.remove(running)

    @precondition(lambda self: self.pools)
    @rule(
        hold=st.sampled_from(["hang", "slow", "retry_once", "fail_once"]),
        which=st.integers(0, 1),
        then_open_the_gate=st.booleans(),
    )
    def freeze_a_pool(self, hold: str, which: int, then_open_the_gate: bool) -> None:
        """Cut a pool off the backend until its leases run out, then reconnect it.

        The other pool's sweeper (or, alone, a sweep as another process would run it)
        recovers its claims; whatever the pool reports for them afterwards must be
        fenced out: a hung handler that returns, a slow one whose outcome it kept
        retrying, a job waiting to retry that it requeues, a prefetched job it starts.
        """
        # a job for the pools to hold: running (hang, slow) or waiting to retry
        job_id = self._enqueue_now("submit", None, {"do": hold, "v": 0})
        ran = [run.link for run in self.runs.get(job_id or "", [])]
        holding = [running for running in self.pools if running.pool.held]
        if not holding:
            return  # (not a precondition: what a pool holds depends on timing)
        # the pool that took the new job, if one did; else one that holds something
        took = [running for running in holding if running.link in ran]
        frozen = (took or holding)[which % len(took or holding)]
        frozen.frozen = self.froze = True
        frozen.link.cut = True
        # A claim call already on its way may still land: let it, within a second.
        # Then past every lease it holds (the last it renewed or took runs out 11 s
        # from now), 5 s at a time: the other pool renews its own leases meanwhile.
        for seconds in (1.0, 5.0, 5.0, 1.0):
            self.jump(seconds)
        if len(self.pools) == 1:
            self.loop.run(self.backend.sweep)  # no other pool: another process sweeps
        frozen.link.cut = False
        self.recovered = self.stats().recovered  # nothing more to recover from now on
        for expected in self.jobs.values():
            expected.exposed = True
        if then_open_the_gate:
            self.open_the_gate()

    @rule()
    def open_the_gate(self) -> None:
        """Let every hung handler return."""

        async def release() -> None:
            gate, self.gate = self.gate, trio.Event()
            gate.set()

        self.loop.run(release)

    # --- producers ---------------------------------------------------------------------

    def level(self, payload: Any) -> int:
        """The priority a job of *payload* is enqueued with."""
        return 0 if self.capacity > 1000 else payload.get("p", 0)  # a stream source: none

    def stats(self) -> trioqueue.MetricsSnapshot:
        return self.loop.run(self.backend.stats, settle=False)

    def _accepts(self, job_id: str | None, payload: Any) -> str:
        """What the model expects: 'new', 'duplicate' or 'conflict'."""
        if job_id is None or job_id not in self.jobs:
            return "new"
        if self.loop.run(self.backend.status, job_id, settle=False) is None:
            self._evicted(job_id)
            return "new"
        return "duplicate" if self.jobs[job_id].payload == payload else "conflict"

    def _evicted(self, job_id: str) -> None:
        """*job_id*'s record is gone: it must have finished, and the retention let it go."""
        assert self.retention is not None, f"{job_id}: record lost with the default retention"
        # dead letters are kept until requeued or purged (by a step, which knows)
        assert self.jobs[job_id].seen is not JobState.FAILED, f"{job_id}: dead letter lost"
        del self.jobs[job_id]

    def _accept(self, job_id: str, payload: Any) -> None:
        self.jobs[job_id] = Expected(payload)
        self.accepted += 1

    def _enqueue_now(
        self, method: str, job_id: str | None, payload: Any, delay: float | None = None
    ) -> str | None:
        """Enqueue at once and check the outcome; return the id of a new job.

        A delayed job never waits for room: `Queue.enqueue` with a *delay* returns at once.
        """
        expected = self._accepts(job_id, payload)
        depth = self.stats().gauges.queue_depth

        async def call() -> trioqueue.Receipt | BaseException:
            try:
                return await getattr(self.queue, method)(
                    payload, id=job_id, delay=delay, priority=self.level(payload)
                )
            except (QueueFull, IdempotencyConflict) as exc:
                return exc

        result = self.loop.run(call)
        if expected == "conflict":
            assert isinstance(result, IdempotencyConflict)
        elif expected == "duplicate":
            assert isinstance(result, trioqueue.Receipt)
            assert result.deduplicated
        elif method == "try_enqueue" and depth >= self.capacity and not delay:
            assert isinstance(result, QueueFull)
        else:
            assert isinstance(result, trioqueue.Receipt), result
            assert not result.deduplicated
            assert result.scheduled == bool(delay)
            self._accept(result.id, payload)
            return result.id
        return None

    @rule(
        job_id=ids | st.none(),
        payload=payloads,
        delay=st.sampled_from([0.5, 3.0, 20.0]),
        method=st.sampled_from(["enqueue", "try_enqueue", "submit"]),
    )
    def enqueue_later(self, job_id: str | None, payload: Any, delay: float, method: str) -> None:
        """A delayed job: stored until due, then on the ready queue as room allows."""
        if self.capacity > 1000:
            return  # a stream source refuses delays (tests/test_redis_streams.py)
        self._enqueue_now(method, job_id, payload, delay)

    @rule(job_id=ids | st.none(), payload=payloads)
    def try_enqueue(self, job_id: str | None, payload: Any) -> None:
        self._enqueue_now("try_enqueue", job_id, payload)

    @rule(job_id=ids | st.none(), payload=payloads)
    def submit(self, job_id: str | None, payload: Any) -> None:
        self._enqueue_now("submit", job_id, payload)

    @rule(job_id=ids, payload=payloads)
    def enqueue_in_the_background(self, job_id: str, payload: Any) -> None:
        """A producer that may block on a full queue; it is accepted when it returns."""
        if self._accepts(job_id, payload) == "conflict":
            return  # covered synchronously by the other rules

        async def produce() -> None:
            try:
                receipt = await self.queue.enqueue(payload, id=job_id, priority=self.level(payload))
            except IdempotencyConflict:
                # another producer took the id with another payload while this one waited
                stored = await self.queue.status(job_id)
                assert stored is None or stored.payload != payload
                return
            finally:
                self.producing -= 1
                if not self.producing:
                    self.no_producers.set()
            if receipt.deduplicated:
                stored = await self.queue.status(job_id)
                assert stored is None or stored.payload == payload  # None: evicted since
            else:
                self._accept(receipt.id, payload)  # a new incarnation if it was evicted

        async def start() -> None:
            if not self.producing:
                self.no_producers = trio.Event()
            self.producing += 1
            self.loop.nursery.start_soon(produce)

        self.loop.run(start)

    @rule(job_id=ids | st.none(), payload=payloads)
    def cancel_a_waiting_producer(self, job_id: str | None, payload: Any) -> None:
        """A producer cancelled while it waits for room has added nothing."""
        if self._accepts(job_id, payload) != "new" or self.capacity > 1000:
            return  # a known id never waits, nor does a producer to a stream
        if not self.pools:  # nothing takes jobs off the queue: fill it, so the producer waits
            while self.stats().gauges.queue_depth < self.capacity:
                self._enqueue_now("try_enqueue", None, {"do": "ok", "v": 0})
        scope = trio.CancelScope()
        receipts: list[trioqueue.Receipt] = []

        async def produce() -> None:
            with scope:
                receipts.append(
                    await self.queue.enqueue(payload, id=job_id, priority=self.level(payload))
                )

        async def start() -> None:
            self.loop.nursery.start_soon(produce)

        async def cancel() -> None:
            scope.cancel()

        self.loop.run(start)
        if receipts:  # the pools made room
            assert not receipts[0].deduplicated
            self._accept(receipts[0].id, payload)
            return
        before = self.stats().enqueued
        self.loop.run(cancel)
        assert not receipts
        if job_id is not None:
            assert self.loop.run(self.backend.status, job_id, settle=False) is None
        assert self.stats().enqueued == before

    # --- time, dead letters ------------------------------------------------------------

    def jump(self, seconds: float) -> None:
        async def jump() -> None:
            self.loop.clock.jump(seconds)

        self.loop.run(jump)

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 5.0]))
    def let_time_pass(self, seconds: float) -> None:
        self.jump(seconds)

    @rule(jumps=st.integers(2, 4))
    def let_much_time_pass(self, jumps: int) -> None:
        """Longer than a lease, 5 s at a time: every live pool renews its leases in time."""
        for _ in range(jumps):
            self.jump(5.0)

    @rule()
    def let_a_job_fail_for_good(self) -> None:
        """A job that fails every attempt, and time for them: a dead letter, if pools run."""
        self._enqueue_now("submit", None, {"do": "always_fail", "v": 0})
        for _ in range(RETRY.max_attempts - 1):
            self.jump(RETRY.max_delay)  # the backoff, then the next attempt

    # Which dead letter a step takes is drawn as a number before the step looks at
    # them: a draw that depends on what the pools did would make Hypothesis' replays
    # (shrinking) draw differently, since the pools' timing is not deterministic.
    @rule(pick=st.integers(0, 15))
    def requeue_a_dead_letter(self, pick: int) -> None:
        dead = self.loop.run(self.queue.dead_letters, settle=False)
        if dead:
            record = dead[pick % len(dead)]
            # its attempts start again: so does the model's record of the handler's runs
            self.runs.pop(record.id, None)
            self.jobs[record.id].exposed = False
            self.jobs[record.id].seen = JobState.RECEIVED
            requeued = self.loop.run(self.queue.requeue_dead, record.id)
            assert (requeued.state, requeued.attempts) == (JobState.RECEIVED, 0)

    @rule(pick=st.integers(0, 15))
    def cancel_a_job(self, pick: int) -> None:
        """Cancel one job the model knows, whatever it is doing (or has done)."""
        if not self.jobs:
            return
        job_id = sorted(self.jobs)[pick % len(self.jobs)]
        before = self.loop.run(self.backend.status, job_id, settle=False)
        try:
            done = self.loop.run(self.queue.cancel, job_id, settle=False)
        except JobNotFound:
            self._evicted(job_id)
            return
        after = self.loop.run(self.backend.status, job_id, settle=False)
        event(f"cancel: {done.value}")
        if done is CancelResult.FINISHED:
            if after is not None:  # (the retention may have let it go since)
                assert after.state in TERMINAL_STATES, after
            if before is not None and before.state in TERMINAL_STATES and after is not None:
                assert after == before, (before, after)  # left alone
            return
        self.jobs[job_id].cancel_asked = True  # a pool holding it stops it when it hears
        if done is CancelResult.CANCELLED and after is not None:
            assert after.state is JobState.CANCELLED, after
            assert not after.queued, after

    @rule(pick=st.integers(0, 15), everything=st.booleans())
    def purge_dead_letters(self, pick: int, everything: bool) -> None:
        dead = [record.id for record in self.loop.run(self.queue.dead_letters, settle=False)]
        if everything:
            purged = dead
            assert self.loop.run(self.queue.purge_dead) == len(dead)
        elif dead:
            purged = [dead[pick % len(dead)]]
            assert self.loop.run(self.queue.purge_dead, purged[0]) == 1
        else:
            assert self.loop.run(self.queue.purge_dead, "j0") == 0
            return
        for job_id in purged:
            assert self.loop.run(self.queue.status, job_id, settle=False) is None
            del self.jobs[job_id]  # forgotten: the id is accepted anew
            self.runs.pop(job_id, None)
        self.purged += len(purged)

    @precondition(lambda self: not self.pools)
    @rule()
    def claim_the_top(self) -> None:
        """With no pool running, a claim takes a job of the highest level that holds one.

        The claim is given back at once (uncounted), first in line at its level.
        """

        async def take() -> tuple[trioqueue.MetricsSnapshot, list[trioqueue.Claim]]:
            before = await self.backend.stats()
            claims = await self.backend.claim(1, lease=LEASE, block=0)
            assert await self.backend.release(claims) == len(claims)
            return before, claims

        before, claims = self.loop.run(take, settle=False)
        if not claims or claims[0].suspect:
            return  # a suspect (a job held by dying workers) goes first, whatever its level
        job = claims[0].job
        assert job.priority == self.level(self.jobs[job.id].payload), job
        # a due job or a stored one may have moved up during the claim: never lower
        waiting = [level for level, n in before.gauges.ready_by_priority.items() if n]
        if waiting:
            assert job.priority >= waiting[0], (job, before.gauges)
            event(f"claim_the_top: {len(waiting)} levels waiting")

    # --- the laws -----------------------------------------------------------------------

    def _shape(self) -> dict[str, tuple[Any, ...] | None]:
        """Each job's state, attempts, place and due time, read now."""

        async def read() -> dict[str, tuple[Any, ...] | None]:
            found = {job_id: await self.backend.status(job_id) for job_id in self.jobs}
            return {
                job_id: None if r is None else (r.state, r.attempts, r.queued, r.due_at)
                for job_id, r in found.items()
            }

        return self.loop.run(read, settle=False)

    @invariant()
    def laws_hold(self) -> None:
        # A step ends once every task has been blocked for the cushion (20 ms on Redis);
        # on a loaded machine a Redis reply can take longer, and a job may still move
        # while the laws read. The gauges are compared with the records only when the
        # records read before and after the gauges agree.
        before = self._shape()
        snap = self.stats()
        assert snap.conserved, snap
        assert snap.enqueued == self.accepted
        if self.previous is not None:
            for name in COUNTER_NAMES:
                assert getattr(snap, name) >= getattr(self.previous, name), name
        self.previous = snap
        # purged dead letters stay counted as dead-lettered, and are no longer held
        assert snap.gauges.dead == snap.dead_lettered - snap.dead_requeued - self.purged

        async def records() -> dict[str, trioqueue.JobRecord | None]:
            return {job_id: await self.backend.status(job_id) for job_id in self.jobs}

        found = self.loop.run(records, settle=False)
        for job_id, record in found.items():
            if record is None:
                self._evicted(job_id)
            else:
                self.jobs[job_id].seen = record.state
        by_id = {job_id: r for job_id, r in found.items() if r is not None}
        for job_id, record in by_id.items():
            assert record.priority == self.level(self.jobs[job_id].payload), record
        if self.retention is not None and self.retention.max_count is not None:
            finished = (JobState.COMPLETED, JobState.DROPPED, JobState.CANCELLED)
            kept = [r for r in by_id.values() if r.state in finished]
            assert len(kept) <= self.retention.max_count
        if not self.froze:
            assert snap.stale == 0  # only a frozen pool's outcomes can come too late
        # The clock never jumps past a live pool's renewal: only a freeze lets leases
        # run out, and it lets them all run out before it reconnects the pool.
        assert snap.recovered == self.recovered
        assert snap.succeeded >= sum(r.state is JobState.COMPLETED for r in by_id.values())
        if self._shape() != before:
            event("a job moved while the laws read: its gauges were not compared")
            return
        g = snap.gauges
        waiting = [
            r for r in by_id.values() if r.state in (JobState.RECEIVED, JobState.FAILED_RETRY)
        ]
        assert g.queue_depth == sum(r.queued for r in by_id.values()) <= self.capacity
        for level, depth in g.ready_by_priority.items():
            assert depth == sum(r.queued and r.priority == level for r in by_id.values()), level
        assert g.inflight == sum(r.state is JobState.PROCESSING for r in by_id.values())
        # a retry's due time is kept while its claim waits out the backoff (retry_waiting)
        # and after a shutdown or crash gave the job back mid-backoff (then scheduled)
        delayed = sum(r.state is JobState.SCHEDULED for r in by_id.values())
        backing_off = sum(
            r.state is JobState.FAILED_RETRY and r.due_at is not None for r in by_id.values()
        )
        assert g.scheduled >= delayed
        if g.scheduled > delayed:
            event("a job given back mid-backoff waits out the rest")
        assert backing_off == g.retry_waiting + g.scheduled - delayed
        assert g.backlog + g.retry_waiting + g.scheduled - delayed == len(waiting)
        assert g.dead == sum(r.state is JobState.FAILED for r in by_id.values())
        for record in by_id.values():
            if record.state is JobState.SCHEDULED:
                assert record.due_at is not None
            elif record.state is not JobState.FAILED_RETRY:
                assert record.due_at is None, record
        if not any(running.frozen for running in self.pools):
            # (a frozen pool may still hold claims the backend took back; and a live pool
            # one whose job a late success finished meanwhile, whose record the retention
            # may even have let go since: its outcome will be refused)
            taken_over = sum(
                1
                for running in self.pools
                for claim in running.pool._books.held.values()
                if claim.job.id not in by_id
                or by_id[claim.job.id].state in (JobState.COMPLETED, JobState.CANCELLED)
            )
            held = sum(r.pool.held for r in self.pools)
            assert g.inflight + g.retry_waiting == held - taken_over

    # --- the end: drain, then every job's fate ------------------------------------------

    def check_fate(self, job_id: str, record: trioqueue.JobRecord) -> None:
        """The record of a drained job must be what its payload told the handler to do.

        Each run of the handler ended as its payload said (or timed out, by its pool's
        handler_timeout). Several runs may share an attempt number: a recovered claim
        runs again, its first run fenced out; any of them may be the one that counted.
        """
        expected = self.jobs[job_id]
        do = expected.payload["do"]
        ended: dict[int, set[str]] = collections.defaultdict(set)
        for run in self.runs.get(job_id, []):
            if run.payload == expected.payload:  # not a run of an earlier incarnation
                ended[run.attempt] |= told(do, run.attempt, run.timeout)
                assert run.priority == self.level(expected.payload), (job_id, run)
        n, state, reason = record.attempts, record.state, record.reason or ""
        where = f"{job_id} {expected.payload}: {state} after {n} attempts ({reason}); {ended}"
        # simple queue only: a handler a shutdown interrupted (the attempt counts), or a
        # claim whose lease ran out while its pool was cut off (it does not)
        interrupted = "interrupted" in reason
        abandoned = "its worker stopped" in reason
        for attempt in range(1, n + 1 if abandoned else n):
            assert ended[attempt] & AGAIN, where  # every earlier attempt asked for another
        assert n <= RETRY.max_attempts, where
        last = ended[n]
        if state is JobState.COMPLETED:
            # the last attempt's run succeeded; or a late success did: a run whose lease
            # ran out (its pool was cut off) finished ok while another run held the job,
            # so an earlier attempt both succeeded and, in its other run, asked for more
            late = any("ok" in ended[a] and ended[a] & AGAIN for a in range(1, n))
            assert "ok" in last or late, where
        elif state is JobState.DROPPED:
            assert "drop" in last, where
            assert reason == "dropped on purpose", where
        elif state is JobState.CANCELLED:
            assert expected.cancel_asked, where  # only a cancel ends a job so
            assert reason.startswith("cancelled while"), where
        elif state is JobState.FAILED and interrupted:
            assert not self.redelivers, where
            assert last, where  # the attempt it was on: a handler a shutdown caught running
            assert do in ("slow", "hang"), where  # the others never wait
        elif state is JobState.FAILED and abandoned:
            assert not self.redelivers, where
            assert expected.exposed, where
        elif state is JobState.FAILED:
            assert n == RETRY.max_attempts, where
            assert last & AGAIN, where
            error = record.last_error
            if reason.startswith(f"failed {n} of {n} attempts"):
                assert error is not None, where
                assert error.type in {ERROR_TYPE[e] for e in last & {"fail", "timeout"}}, where
            else:
                assert "retry" in last, where
                assert "raised Retry" in reason, where
        else:
            raise AssertionError(f"not finished after the drain: {where}")

    def teardown(self) -> None:
        try:

            async def stop() -> None:
                self.gate.set()  # for good: a hung handler runs to its end from now on
                self.loop.clock.autojump_threshold = self.loop.cushion
                for running in self.pools:
                    await running.pool.shutdown(0)

            self.loop.run(stop)
            self.pools = []

            async def drain() -> None:
                self.loop.clock.autojump_threshold = self.loop.cushion
                with trio.fail_after(10_000):
                    async with trioqueue.open_worker_pool(
                        self.backend, self.handler_for(None, None), retry=RETRY, lease=LEASE
                    ):
                        await self.no_producers.wait()  # the ones still waiting for room

            self.loop.run(drain)
            snap = self.stats()
            assert snap.gauges.held == 0
            assert snap.conserved
            assert snap.enqueued == self.accepted

            async def records() -> dict[str, trioqueue.JobRecord | None]:
                return {job_id: await self.backend.status(job_id) for job_id in self.jobs}

            for job_id, record in self.loop.run(records, settle=False).items():
                if record is None:
                    self._evicted(job_id)
                else:
                    self.check_fate(job_id, record)
        finally:
            self.loop.close()


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
@pytest.mark.parametrize("shard", range(SHARDS), ids=lambda n: f"shard{n}")
def test_conservation_under_random_operations(make_backend, shard):
    machine = type("Machine", (ConservationMachine,), {"make_backend": staticmethod(make_backend)})
    profile = settings()  # the loaded profile: 'default', or 'ci' in CI
    examples = max(1, round(profile.max_examples * SHARE[make_backend.kind] / SHARDS))
    run_state_machine_as_test(
        machine,
        settings=settings(profile, max_examples=examples, stateful_step_count=STEPS, deadline=None),
    )
