"""Schedules: every tick one job, however many schedulers run; missed ticks by policy.

Time runs on the autojump clock; the schedulers' wall clock is built on it
(`wall`), and schedules tick every STEP (5 s: each second of a pool on Redis
costs real round trips), so tick 3 falls 15 s after the test began. A stream source
cannot hold a job until a due time, which a scheduler needs: not_on_stream.
"""

from __future__ import annotations

import collections
import datetime

import pytest
import trio

import trioqueue
from trioqueue import JobState, MissedTicks, Queue, Schedule

pytestmark = pytest.mark.not_on_stream

# 2026-12-03T00:00:00Z: a multiple of STEP, so tick n falls n steps into the test
EPOCH = 1_796_256_000.0
STEP = datetime.timedelta(seconds=5)
S = STEP.total_seconds()


def wall() -> float:
    """The schedulers' wall clock: the epoch above plus Trio's (mock) time."""
    return EPOCH + trio.current_time()


def tick_id(name: str, n: int, step: float = S) -> str:
    """The job id of schedule *name*'s tick *n* (n steps after the epoch)."""
    moment = datetime.datetime.fromtimestamp(EPOCH + step * n, datetime.UTC)
    return f"{name}@{moment:%Y-%m-%dT%H:%M:%S}Z"


async def test_each_tick_runs_once_at_its_time(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    started: dict[str, list[float]] = collections.defaultdict(list)

    async def handler(job: trioqueue.Job) -> None:
        started[job.id].append(wall())

    schedule = Schedule("report", every=STEP)
    async with (
        trioqueue.open_worker_pool(backend, handler),
        trioqueue.open_scheduler(queue, [schedule], clock=wall) as scheduler,
    ):
        assert scheduler.next_ticks == {
            "report": datetime.datetime.fromtimestamp(EPOCH + S, datetime.UTC)
        }
        await trio.sleep(5.5 * S)
        # the sixth tick is stored ahead, for whichever scheduler or worker comes next
        ahead = await queue.status(tick_id("report", 6))
        assert ahead is not None
        assert ahead.state is JobState.SCHEDULED
        assert scheduler.stored == 6
        assert (await backend.schedule_marks()) == {"report": EPOCH + 6 * S}
    # (leaving the pool's block drained the queue: the sixth ran at its time too)
    assert sorted(started) == [tick_id("report", m) for m in range(1, 7)]
    for n in range(1, 7):
        [at] = started[tick_id("report", n)]  # once
        assert 0 <= at - (EPOCH + S * n) < 0.5  # at its tick, never early
    job = await queue.status(tick_id("report", 1))
    assert job is not None
    assert job.payload == {"schedule": "report", "tick": "2026-12-03T00:00:05Z"}


async def test_three_schedulers_make_one_job_per_tick(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    runs: collections.Counter[str] = collections.Counter()

    async def handler(job: trioqueue.Job) -> None:
        runs[job.id] += 1

    schedules = [Schedule("a", every=STEP), Schedule("b", every=2 * STEP, payload=[1])]
    async with (
        trioqueue.open_worker_pool(backend, handler),
        trioqueue.open_scheduler(queue, schedules, clock=wall),
        trioqueue.open_scheduler(queue, schedules, clock=wall),
        trioqueue.open_scheduler(queue, schedules, clock=wall),
    ):
        await trio.sleep(10.5 * S)
    # (leaving the pool's block drained the queue: the ticks stored ahead ran too)
    expected = [tick_id("a", m) for m in range(1, 12)] + [
        tick_id("b", m) for m in (2, 4, 6, 8, 10, 12)
    ]
    assert sorted(runs) == sorted(expected)
    assert set(runs.values()) == {1}
    snap = await backend.stats()
    # each of the 17 ticks was offered by each of the three schedulers
    assert (snap.enqueued, snap.deduplicated) == (17, 34)
    assert snap.conserved


@pytest.mark.parametrize(
    ("missed", "catch_up", "run"),
    [
        (MissedTicks.SKIP, 100, []),
        (MissedTicks.LATEST, 100, [12]),
        (MissedTicks.ALL, 100, [4, 5, 6, 7, 8, 9, 10, 11, 12]),
        (MissedTicks.ALL, 3, [10, 11, 12]),
    ],
)
async def test_ticks_missed_while_no_scheduler_ran_follow_the_policy(
    make_backend, autojump_clock, missed, catch_up, run
):
    """A scheduler runs for 2.5 s (ticks 1 and 2 due, 3 stored ahead), every
    scheduler is then down until 12.5 s, and one starts again (ticks every second)."""
    backend = await make_backend()
    queue = Queue(backend)
    schedule = Schedule(
        "sync", every=datetime.timedelta(seconds=1), missed=missed, catch_up=catch_up
    )
    async with trioqueue.open_scheduler(queue, [schedule], clock=wall):
        await trio.sleep(2.5)
    await trio.sleep(10)  # down: ticks 3 (stored ahead) to 12 fall meanwhile
    async with trioqueue.open_scheduler(queue, [schedule], clock=wall) as scheduler:
        assert scheduler.caught_up == len(run)
        assert scheduler.next_ticks["sync"].timestamp() == EPOCH + 13
    stored = {n for n in range(1, 14) if await queue.status(tick_id("sync", n, step=1)) is not None}
    # 1-3 stored by the first run; 13 ahead by the second; the missed ones by policy
    assert stored == {1, 2, 3, 13, *run}
    if run:
        record = await queue.status(tick_id("sync", run[0], step=1))
        assert record is not None
        assert record.state is JobState.RECEIVED  # at once, not waiting for a due time


async def test_a_first_start_catches_up_nothing(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await trio.sleep(60)  # ticks fell before the first start: none of them is missed
    schedule = Schedule("fresh", every=STEP, missed=MissedTicks.ALL)
    async with trioqueue.open_scheduler(queue, [schedule], clock=wall) as scheduler:
        pass
    assert (scheduler.caught_up, scheduler.stored) == (0, 1)
    assert await backend.schedule_marks() == {"fresh": EPOCH + 13 * S}


async def test_a_tick_stored_with_another_payload_stands(make_backend, autojump_clock, caplog):
    """Two deployments disagree on a schedule's payload: the first stored tick stands,
    the other scheduler says so and goes on."""
    backend = await make_backend()
    queue = Queue(backend)
    first = [Schedule("x", every=STEP, payload=1)]
    second = [Schedule("x", every=STEP, payload=2)]
    async with (
        trioqueue.open_scheduler(queue, first, clock=wall),
        trioqueue.open_scheduler(queue, second, clock=wall) as other,
    ):
        assert other.stored == 0
    record = await queue.status(tick_id("x", 1))
    assert record is not None
    assert record.payload == 1
    assert "stored with another payload" in caplog.text
