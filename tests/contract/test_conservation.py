"""The conservation law, checked after every step of random operations.

``enqueued + dead_requeued == succeeded + dead_lettered + dropped + held`` holds at
every quiescent point, counters never decrease, and every gauge equals the count
read off the job records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from hypothesis import settings
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
from trioqueue import IdempotencyConflict, JobState, Queue, QueueFull, RetryPolicy
from trioqueue._metrics import COUNTER_NAMES

from ..conftest import JUMP_AFTER
from ..trio_thread import TrioThread

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


# What a job's handler does, chosen by its payload.
BEHAVIOURS = ("ok", "fail_once", "always_fail", "drop", "retry_once", "slow")
ids = st.sampled_from([f"j{i}" for i in range(12)])
payloads = st.fixed_dictionaries({"do": st.sampled_from(BEHAVIOURS), "v": st.integers(0, 2)})


async def handler(job: trioqueue.Job) -> None:
    do = job.payload["do"]
    if do == "slow":
        await trio.sleep(3)
    elif do == "always_fail" or (do == "fail_once" and job.attempt == 1):
        raise RuntimeError(f"{do} on attempt {job.attempt}")
    elif do == "drop":
        raise trioqueue.Drop("dropped on purpose")
    elif do == "retry_once" and job.attempt == 1:
        raise trioqueue.Retry(delay=1.5)


class ConservationMachine(RuleBasedStateMachine):
    make_backend: Callable[..., Awaitable[trioqueue.Backend]]

    def __init__(self) -> None:
        super().__init__()
        self.loop = TrioThread(cushion=JUMP_AFTER[type(self).make_backend.kind])
        self.pool: trioqueue.WorkerPool | None = None
        self.payloads: dict[str, Any] = {}  # the model: id -> accepted payload
        self.previous: trioqueue.MetricsSnapshot | None = None

    @initialize(capacity=st.integers(1, 4), workers=st.integers(1, 3))
    def start(self, capacity: int, workers: int) -> None:
        self.capacity = capacity
        self.workers = workers
        self.backend = self.loop.run(type(self).make_backend, capacity)
        self.queue = Queue(self.backend)
        self.start_pool()

    def start_pool(self) -> None:
        retry = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=2.0)

        async def run_pool(task_status: trio.TaskStatus[trioqueue.WorkerPool]) -> None:
            async with trioqueue.open_worker_pool(
                self.backend, handler, workers=self.workers, retry=retry, seed=0, lease=10
            ) as pool:
                task_status.started(pool)
                await pool.wait_stopped()

        async def start() -> trioqueue.WorkerPool:
            return await self.loop.nursery.start(run_pool)

        self.pool = self.loop.run(start)

    def stats(self) -> trioqueue.MetricsSnapshot:
        return self.loop.run(self.backend.stats, settle=False)

    # --- producers ---------------------------------------------------------------------

    def _accepts(self, job_id: str | None, payload: Any) -> str:
        """What the model expects: 'new', 'duplicate' or 'conflict'."""
        if job_id is None or job_id not in self.payloads:
            return "new"
        return "duplicate" if self.payloads[job_id] == payload else "conflict"

    def _enqueue_now(self, method: str, job_id: str | None, payload: Any) -> None:
        expected = self._accepts(job_id, payload)
        depth = self.stats().gauges.queue_depth

        async def call() -> trioqueue.Receipt | BaseException:
            try:
                return await getattr(self.queue, method)(payload, id=job_id)
            except (QueueFull, IdempotencyConflict) as exc:
                return exc

        result = self.loop.run(call)
        if expected == "conflict":
            assert isinstance(result, IdempotencyConflict)
        elif expected == "duplicate":
            assert isinstance(result, trioqueue.Receipt)
            assert result.deduplicated
        elif method == "try_enqueue" and depth >= self.capacity:
            assert isinstance(result, QueueFull)
        else:
            assert isinstance(result, trioqueue.Receipt), result
            assert not result.deduplicated
            self.payloads[result.id] = payload

    @rule(job_id=ids | st.none(), payload=payloads)
    def try_enqueue(self, job_id: str | None, payload: Any) -> None:
        self._enqueue_now("try_enqueue", job_id, payload)

    @rule(job_id=ids | st.none(), payload=payloads)
    def submit(self, job_id: str | None, payload: Any) -> None:
        self._enqueue_now("submit", job_id, payload)

    @rule(job_id=ids, payload=payloads)
    def enqueue_in_the_background(self, job_id: str, payload: Any) -> None:
        """A producer that may block on a full queue; it is accepted when it returns."""
        expected = self._accepts(job_id, payload)
        if expected == "conflict":
            return  # covered synchronously by the other rules

        async def produce() -> None:
            try:
                receipt = await self.queue.enqueue(payload, id=job_id)
            except IdempotencyConflict:
                # another producer took the id with another payload while this one waited
                stored = await self.queue.status(job_id)
                assert stored is not None
                assert stored.payload != payload
                return
            if receipt.deduplicated:
                stored = await self.queue.status(job_id)
                assert stored is not None
                assert stored.payload == payload
            else:
                self.payloads[receipt.id] = payload

        async def start() -> None:
            self.loop.nursery.start_soon(produce)

        self.loop.run(start)

    # --- time, shutdown, dead letters --------------------------------------------------

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 5.0]))
    def let_time_pass(self, seconds: float) -> None:
        async def jump() -> None:
            self.loop.clock.jump(seconds)

        self.loop.run(jump)

    @precondition(lambda self: self.pool is not None)
    @rule(grace=st.sampled_from([0.0, 1.0, 4.0]))
    def shut_down(self, grace: float) -> None:
        pool = self.pool
        assert pool is not None

        async def shutdown() -> trioqueue.ShutdownReport:
            self.loop.clock.autojump_threshold = self.loop.cushion
            try:
                with trio.fail_after(grace + 1):
                    return await pool.shutdown(grace)
            finally:
                self.loop.clock.autojump_threshold = float("inf")

        report = self.loop.run(shutdown)
        assert report.finished + report.cancelled <= self.workers
        self.pool = None

    @precondition(lambda self: self.pool is None)
    @rule()
    def restart_pool(self) -> None:
        self.start_pool()

    @rule(data=st.data())
    def requeue_a_dead_letter(self, data: st.DataObject) -> None:
        dead = self.loop.run(self.queue.dead_letters)
        if dead:
            record = data.draw(st.sampled_from(dead))
            requeued = self.loop.run(self.queue.requeue_dead, record.id)
            assert (requeued.state, requeued.attempts) == (JobState.RECEIVED, 0)

    # --- the laws -----------------------------------------------------------------------

    @invariant()
    def conservation_holds(self) -> None:
        snap = self.stats()
        assert snap.conserved, snap
        assert snap.enqueued == len(self.payloads)

    @invariant()
    def counters_never_decrease(self) -> None:
        snap = self.stats()
        if self.previous is not None:
            for name in COUNTER_NAMES:
                assert getattr(snap, name) >= getattr(self.previous, name), name
        self.previous = snap

    @invariant()
    def gauges_equal_the_true_counts(self) -> None:
        async def records() -> list[trioqueue.JobRecord]:
            found = [await self.backend.status(job_id) for job_id in self.payloads]
            return [r for r in found if r is not None]

        by_id = {r.id: r for r in self.loop.run(records, settle=False)}
        assert set(by_id) == set(self.payloads)  # retention is large: nothing evicted
        g = self.stats().gauges
        waiting = [
            r for r in by_id.values() if r.state in (JobState.RECEIVED, JobState.FAILED_RETRY)
        ]
        assert g.queue_depth == sum(r.queued for r in by_id.values()) <= self.capacity
        assert g.inflight == sum(r.state is JobState.PROCESSING for r in by_id.values())
        assert g.backlog + g.retry_waiting == len(waiting)
        assert g.dead == sum(r.state is JobState.FAILED for r in by_id.values())
        held_by_pool = self.pool.held if self.pool is not None else 0
        assert g.inflight + g.retry_waiting == held_by_pool
        snap = self.stats()
        assert snap.succeeded >= sum(r.state is JobState.COMPLETED for r in by_id.values())

    def teardown(self) -> None:
        try:
            if self.pool is not None:
                pool = self.pool

                async def stop() -> None:
                    self.loop.clock.autojump_threshold = self.loop.cushion
                    await pool.shutdown(0)

                self.loop.run(stop)
            # Everything accepted is either finished or still held: drain it all now.
            self.pool = None

            async def drain() -> None:
                self.loop.clock.autojump_threshold = self.loop.cushion
                retry = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=2.0)
                with trio.fail_after(10_000):
                    async with trioqueue.open_worker_pool(self.backend, handler, retry=retry):
                        pass

            self.loop.run(drain)
            snap = self.stats()
            assert snap.gauges.held == 0
            assert snap.conserved
        finally:
            self.loop.close()


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_conservation_under_random_operations(make_backend):
    machine = type("Machine", (ConservationMachine,), {"make_backend": staticmethod(make_backend)})
    # a Redis step waits for real quiet (20 ms) after each step: fewer examples there
    examples = 60 if getattr(make_backend, "kind", "memory") == "memory" else 25
    run_state_machine_as_test(
        machine, settings=settings(max_examples=examples, stateful_step_count=30, deadline=None)
    )
