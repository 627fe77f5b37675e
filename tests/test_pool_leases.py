"""A pool never starts a claim whose lease ran out while it waited (mock clock)."""

from __future__ import annotations

import collections
import logging
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trioqueue
from trioqueue import BackendUnavailable, Queue

from .fake_outage import Outages


class SlowFirstClaimReply:
    """A MemoryBackend whose first claim reply arrives *delay* seconds after the claim.

    As a process paused (SIGSTOP, a blocked event loop) between the backend making
    the claim and the pool reading the reply: the lease runs meanwhile.
    """

    def __init__(self, inner: trioqueue.MemoryBackend, delay: float) -> None:
        self.inner, self.delay = inner, delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> Any:
        claims = await self.inner.claim(max_jobs, lease=lease, block=block)
        if claims and self.delay:
            await trio.sleep(self.delay)
            self.delay = 0
        return claims


class BlockedAfterTheSweepersRenewal:
    """A MemoryBackend after whose first renewal by the sweeper the event loop blocks.

    The clock jumps *block* seconds as the renewal returns, as a handler calling
    time.sleep would hold the loop then: the sweeper's sweep comes that much later.
    """

    def __init__(self, inner: trioqueue.MemoryBackend, clock: Any, block: float) -> None:
        self.inner, self.clock, self.block = inner, clock, block

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def renew(self, claims: Any, *, lease: float) -> trioqueue.Renewal:
        renewal = await self.inner.renew(claims, lease=lease)
        if self.block and "sweep" in trio.lowlevel.current_task().name:
            self.clock.jump(self.block)
            self.block = 0
        return renewal


class RenewalsFailAWhile:
    """A MemoryBackend whose renewals fail until *until* (Trio's clock), then work."""

    def __init__(self, inner: trioqueue.MemoryBackend, until: float) -> None:
        self.inner, self.until = inner, until

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def renew(self, claims: Any, *, lease: float) -> trioqueue.Renewal:
        if trio.current_time() < self.until:
            await trio.lowlevel.checkpoint()
            raise BackendUnavailable("fake://db", "renewal refused")
        return await self.inner.renew(claims, lease=lease)


# Renewals fail (a cut link, a pause) while "long" holds the only worker and "next" waits
# prefetched; another pool's sweeper recovers both claims at 5 s. Either renewals never
# come back, or they do at 5.5 s, before "long" ends: then the backend says the claim of
# "next" is gone, and the pool must not give it a new lease.
@pytest.mark.parametrize(
    ("renewals_back_at", "long_runs"),
    [(math.inf, 10.0), (5.5, 7.0)],
    ids=["renewals-fail-throughout", "renewals-back-before-it-starts"],
)
async def test_a_prefetched_claim_whose_lease_ran_out_is_given_back_not_started(
    autojump_clock, caplog: pytest.LogCaptureFixture, renewals_back_at: float, long_runs: float
):
    memory = trioqueue.MemoryBackend()
    runs: collections.Counter[str] = collections.Counter()

    async def handler(job: trioqueue.Job) -> None:
        runs[job.id] += 1
        if job.id == "long" and runs[job.id] == 1:
            await trio.sleep(long_runs)  # past every lease: the prefetched claim waits

    async with trioqueue.open_worker_pool(
        RenewalsFailAWhile(memory, until=renewals_back_at),  # type: ignore[arg-type]
        handler,
        workers=1,
        prefetch=1,
        lease=3,
        sweep_interval=60,
    ):
        await Queue(memory).enqueue("long", id="long")
        await Queue(memory).enqueue("next", id="next")
        await trio.sleep(5)
        # another pool's sweeper: both leases ran out at 3 s; it puts both jobs back
        assert (await memory.sweep()).recovered == 2
    # the prefetched claim of "next" lapsed at 3 s and was recovered: it runs once, from
    # the new claim, not also from the one that lapsed
    assert runs["next"] == 1
    lapsed = [r for r in caplog.records if "lease ran out before it started" in r.getMessage()]
    assert [r.levelno for r in lapsed] == [logging.WARNING]
    assert "job next:" in lapsed[0].getMessage()
    assert memory.metrics.snapshot().stale >= 1
    assert (await memory.stats()).conserved


async def test_a_claim_whose_reply_came_after_its_lease_ran_out_is_not_started(
    autojump_clock, caplog: pytest.LogCaptureFixture
):
    # The lease starts when the backend makes the claim: a pool that counted it from the
    # reply's arrival would run a job the backend had already given to another worker
    # (at-most-once: one it had already dead-lettered).
    memory = trioqueue.MemoryBackend()
    runs: collections.Counter[str] = collections.Counter()

    async def handler(job: trioqueue.Job) -> None:
        runs[job.id] += 1

    await Queue(memory).enqueue("a", id="a")
    async with trioqueue.open_worker_pool(
        SlowFirstClaimReply(memory, delay=5),  # type: ignore[arg-type]
        handler,
        workers=1,
        prefetch=0,
        lease=3,
        sweep_interval=60,
    ):
        await trio.sleep(4)
        assert (await memory.sweep()).recovered == 1  # another pool's sweeper, at 4 s
        await trio.sleep(2)  # the reply comes at 5 s (leaving the body before would cancel it)
    assert runs["a"] == 1  # from the recovered claim, not also from the lapsed one
    assert any("lease ran out before it started" in r.getMessage() for r in caplog.records)
    assert (await memory.stats()).conserved


async def test_a_handler_that_blocks_the_event_loop_is_named_with_the_fix(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
):
    backend = trioqueue.MemoryBackend()
    runs: list[str] = []

    async def blocking(job: trioqueue.Job) -> None:
        runs.append(job.id)
        autojump_clock.jump(8)  # as time.sleep(8) would: no other task runs meanwhile
        await trio.lowlevel.checkpoint()

    async with trioqueue.open_worker_pool(backend, blocking, lease=3):
        await trio.testing.wait_all_tasks_blocked()  # the renewer waits for its first period
        await Queue(backend).enqueue("x", id="blocker")
    [warning] = [r for r in caplog.records if "event loop was blocked" in r.getMessage()]
    message = warning.getMessage()
    assert warning.levelno == logging.WARNING
    assert "blocked for 7.0 s" in message  # the renewal was due 1 s in, woke at 8
    assert "running then: blocker" in message
    assert "trio.to_thread.run_sync" in message
    assert runs == ["blocker"]


async def test_a_sweep_after_a_blocked_loop_finds_the_pools_own_claims_renewed(
    autojump_clock: trio.testing.MockClock,
):
    memory = trioqueue.MemoryBackend()
    backend = BlockedAfterTheSweepersRenewal(memory, autojump_clock, block=8)
    runs: list[float] = []

    async def slow(job: trioqueue.Job) -> None:
        runs.append(trio.current_time())
        await trio.sleep(20)

    await Queue(memory).enqueue("x", id="x")
    async with trioqueue.open_worker_pool(backend, slow, lease=3, sweep_interval=1):  # type: ignore[arg-type]
        pass
    assert backend.block == 0  # the loop did block after a renewal of the sweeper's
    assert len(runs) == 1  # its own sweep did not take the job from under its handler
    assert (await memory.stats()).recovered == 0


async def test_a_renewal_slowed_by_an_outage_is_not_a_blocked_event_loop(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
):
    memory = trioqueue.MemoryBackend()

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(100)

    async with trioqueue.open_worker_pool(
        Outages(memory, (5, 60), hang=False),
        slow,
        lease=9,  # type: ignore[arg-type]
    ):
        await Queue(memory).enqueue("x", id="x")
    assert not [r for r in caplog.records if "event loop was blocked" in r.getMessage()]


@pytest.mark.parametrize("mode", ["paused", "blocked"])
def test_a_paused_process_is_told_from_a_handler_that_blocks(mode: str):
    """SIGSTOP stops every thread; a blocking handler only the event loop (real time)."""
    target = Path(__file__).with_name("pause_target.py")
    handler = "sleeps" if mode == "paused" else "blocks"
    process = subprocess.Popen(
        [sys.executable, str(target), handler, "3" if mode == "paused" else "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "started\n"
    if mode == "paused":
        time.sleep(0.2)
        process.send_signal(signal.SIGSTOP)
        time.sleep(2)
        process.send_signal(signal.SIGCONT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    if mode == "paused":
        assert "this process stood still for" in err
        assert "SIGSTOP" in err
        assert "event loop was blocked" not in err
    else:
        assert "event loop was blocked" in err
        assert "running then: the-job" in err
        assert "stood still" not in err
