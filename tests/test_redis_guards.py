"""Guards of the Redis scripts that the rest of the suite let through when broken.

Each test here failed against one bug planted in the Lua scripts (named in its
docstring). Time runs on a clock the test moves by hand, and sweeps run when the
test says; the one pool test runs on Trio's mock clock.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import attrs
import coredis
import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import ErrorInfo, JobState, Queue

from .conftest import collect
from .redis_time import Clock, pass_time

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .redis_server import RedisServer

MIN_IDLE = 5.0
ERROR = ErrorInfo(type="RuntimeError", message="boom")
MODES = pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "simple"])


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Jump only after 20 ms with every task blocked: a Redis reply may be on its way."""
    return trio.testing.MockClock(autojump_threshold=0.02)


def open_backend(
    server: RedisServer, clock: Callable[[], float], **options: Any
) -> trioqueue.RedisBackend:
    """A backend on a queue of its own; use it with ``async with``."""
    options = {"min_idle": MIN_IDLE, **options}
    queue = "{t-" + uuid.uuid4().hex[:12] + "}"
    return trioqueue.RedisBackend(server.url, queue=queue, clock=clock, **options)


# --- fencing: a stale owner's every outcome is refused --------------------------------

STALE_OUTCOMES: dict[str, Callable[[trioqueue.RedisBackend, trioqueue.Claim], Awaitable[bool]]] = {
    "retry_later": lambda backend, claim: backend.retry_later(claim, ERROR),
    "requeue": lambda backend, claim: backend.requeue(claim),
    "dead_letter": lambda backend, claim: backend.dead_letter(claim, ERROR, "stale owner"),
    "drop": lambda backend, claim: backend.drop(claim, "stale owner"),
}
# (a stale owner's ack is a late success, kept while no other run has finished: see
# test_a_late_success_is_kept_when_no_other_run_has_finished in the contract suite)


async def held_state(backend: trioqueue.RedisBackend, client: coredis.Redis[bytes]) -> tuple:
    """Everything a stale outcome could disturb: the record (tokens too), lists, counters."""
    keys = backend.keys
    return (
        await backend.status("J"),
        await client.hgetall(keys.job_prefix + "J"),
        await client.zscore(keys.claims, "\0J"),
        await backend.inspect(),
        await backend.stats(),
    )


@MODES
@pytest.mark.parametrize("outcome", list(STALE_OUTCOMES))
async def test_a_stale_owners_outcome_of_any_kind_leaves_the_new_owners_claim_alone(
    redis_server: RedisServer, reliable: bool, outcome: str
):
    """Planted bug: settle.lua checked the claim's token only for an ack."""
    clock = Clock()
    async with (
        open_backend(redis_server, clock, reliable=reliable) as backend,
        coredis.Redis.from_url(redis_server.url) as client,
    ):
        await Queue(backend).enqueue("p", id="J")
        [old] = await backend.claim(1, lease=MIN_IDLE, block=0)
        if outcome == "requeue":  # a requeue follows a retry_later
            assert await backend.retry_later(old, ERROR)
        await pass_time(backend, clock, MIN_IDLE + 1)  # the old owner stalls past its lease
        await backend.sweep()
        if await backend.dead_letters():  # a simple queue keeps it; an operator requeues it
            await backend.requeue_dead("J")
        [new] = await backend.claim(1, lease=MIN_IDLE, block=0)
        record, raw, score, info, stats = await held_state(backend, client)
        assert record is not None
        assert record.state is JobState.PROCESSING
        assert raw[b"t"] == new.token.encode()

        assert not await STALE_OUTCOMES[outcome](backend, old)

        # the record only notes the late outcome ('l': max_deliveries's reason tells it)
        late = {**raw, b"l": str(int(raw.get(b"l", b"0")) + 1).encode()}
        assert await held_state(backend, client) == (
            record,
            late,
            score,
            info,
            attrs.evolve(stats, stale=stats.stale + 1),
        )
        assert await backend.ack(new)  # the new owner's claim still holds


# --- the grace of a processing entry whose claim is not registered yet ----------------


async def blmove_by_hand(backend: trioqueue.RedisBackend, client: coredis.Redis[bytes]) -> bytes:
    """Move the next job to the processing list as a worker's BLMOVE does, before its claim."""
    keys = backend.keys
    element = await client.lmove(keys.ready, keys.processing, "RIGHT", "LEFT")
    assert element is not None
    return element


async def register_late(backend: trioqueue.RedisBackend, element: bytes) -> list[trioqueue.Claim]:
    """The claim script a worker runs after its BLMOVE, as `RedisBackend.claim` runs it."""
    rows, _ = await backend._run("claim", 1, MIN_IDLE, "", "", element)
    return await backend._claims(rows)


async def test_a_blmoved_entry_keeps_its_job_for_min_idle_so_its_late_claim_gets_it(
    redis_server: RedisServer,
):
    """Planted bug: sweep.lua stamped an unregistered entry NOW instead of NOW + grace."""
    clock = Clock()
    async with (
        open_backend(redis_server, clock) as backend,
        coredis.Redis.from_url(redis_server.url) as client,
    ):
        await Queue(backend).enqueue("p", id="J")
        element = await blmove_by_hand(backend, client)
        assert (await backend.sweep()).recovered == 0  # stamps it
        await pass_time(backend, clock, MIN_IDLE - 1)
        assert (await backend.sweep()).recovered == 0
        info = await backend.inspect()
        assert (info.ready, info.processing, info.claims) == (0, 1, 1)  # still the worker's
        [claim] = await register_late(backend, element)
        assert claim.job.id == "J"
        assert await backend.ack(claim)
        assert (await backend.stats()).recovered == 0


async def test_a_blmoved_entry_whose_claim_never_comes_is_recovered_after_min_idle(
    redis_server: RedisServer,
):
    """Planted bugs: no grace (stamped NOW), or too long a one (NOW + 2 * grace)."""
    clock = Clock()
    async with (
        open_backend(redis_server, clock) as backend,
        coredis.Redis.from_url(redis_server.url) as client,
    ):
        await Queue(backend).enqueue("p", id="J")
        await blmove_by_hand(backend, client)  # and the worker dies
        assert (await backend.sweep()).recovered == 0
        await pass_time(backend, clock, MIN_IDLE - 1)
        assert (await backend.sweep()).recovered == 0
        await pass_time(backend, clock, 2)
        assert (await backend.sweep()).recovered == 1
        [claim] = await backend.claim(1, lease=MIN_IDLE, block=0)
        assert claim.job.id == "J"
        assert await backend.ack(claim)


async def test_a_keyed_job_waits_for_an_earlier_one_of_its_key_that_a_blmove_holds(
    redis_server: RedisServer,
):
    """Another consumer's BLMOVE moved job 1 of key A; before its claim registers it,
    a claim takes job 2 of A. With room for one start, job 2 must not take it: it
    waits its turn behind job 1 (planted bug, and the race three processes met: the
    landing not looked at, and job 2 started first)."""
    clock = Clock()
    async with (
        open_backend(redis_server, clock) as backend,
        coredis.Redis.from_url(redis_server.url) as client,
    ):
        queue = Queue(backend)
        await queue.set_rate_limits(per_key=trioqueue.RateLimit(1, per=10))
        await queue.enqueue_many(["one", "two"], ids=["j1", "j2"], rate_key="A")
        landed = await blmove_by_hand(backend, client)  # j1, on its way to a worker
        assert await backend.claim(1, lease=MIN_IDLE, block=0) == []
        assert await state_of(queue, "j2") is JobState.SCHEDULED  # in A's line
        [first] = await register_late(backend, landed)
        assert first.job.id == "j1"  # the key's start, in its order
        assert await backend.ack(first)
        await pass_time(backend, clock, 10)
        [second] = await backend.claim(1, lease=MIN_IDLE, block=0)
        assert second.job.id == "j2"
        assert await backend.ack(second)


async def state_of(queue: Queue, job_id: str) -> JobState:
    record = await queue.status(job_id)
    assert record is not None
    return record.state


# --- a claim holds for its whole lease -------------------------------------------------


@MODES
async def test_a_claim_holds_for_its_whole_lease_and_not_longer(
    redis_server: RedisServer, reliable: bool
):
    """Planted bug: claim.lua registered the lease as NOW + lease / 2."""
    clock = Clock()
    lease = 10.0  # not min_idle: the lease the claim asks for counts
    async with open_backend(redis_server, clock, reliable=reliable, min_idle=30) as backend:
        await Queue(backend).enqueue("p", id="J")
        await backend.claim(1, lease=lease, block=0)
        await pass_time(backend, clock, 0.9 * lease)
        assert (await backend.sweep()).recovered == 0
        assert await backend.dead_letters() == []
        record = await backend.status("J")
        assert record is not None
        assert record.state is JobState.PROCESSING
        await pass_time(backend, clock, 0.2 * lease)
        report = await backend.sweep()
        record = await backend.status("J")
        assert record is not None
        if reliable:  # at least once: back on the queue
            assert (report.recovered, record.state) == (1, JobState.RECEIVED)
        else:  # at most once: kept as a dead letter
            assert (report.recovered, record.state) == (0, JobState.FAILED)
            assert [dead.id for dead in await backend.dead_letters()] == ["J"]


# --- second angles on guards the suite tests once --------------------------------------


async def test_jobs_a_clean_pool_shutdown_gave_back_keep_their_delivery_budget(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    """Planted bug: release.lua no longer took back the delivery its claim counted."""
    async with open_backend(
        redis_server, trio.current_time, min_idle=30, max_deliveries=1
    ) as backend:
        queue = Queue(backend)
        await queue.enqueue("slow", id="A")
        await queue.enqueue("next", id="J")

        async def slow(job: trioqueue.Job) -> None:
            await trio.sleep(2)

        # one worker runs A; J waits in the prefetch buffer and is given back unstarted
        async with trioqueue.open_worker_pool(backend, slow, workers=1, prefetch=1) as pool:
            await trio.sleep(1)
            report = await pool.shutdown(grace=5)
        assert report == trioqueue.ShutdownReport(finished=1, cancelled=0, released=1)
        seen: list[trioqueue.Job] = []
        async with trioqueue.open_worker_pool(backend, collect(seen)):
            pass
        assert [(job.id, job.attempt) for job in seen] == [("J", 1)]  # its first delivery
        assert await backend.dead_letters() == []
        stats = await backend.stats()
        assert (stats.succeeded, stats.released, stats.dead_lettered) == (2, 1, 0)


async def test_a_retry_replayed_in_the_same_round_trip_ends_one_attempt(
    redis_server: RedisServer,
):
    """Planted bug: settle.lua without its 'already counted' branch."""
    async with open_backend(redis_server, Clock(), min_idle=30) as backend:
        await Queue(backend).enqueue("p", id="J")
        [claim] = await backend.claim(1, lease=30, block=0)
        replies: list[bool] = []

        async def send() -> None:
            replies.append(await backend.retry_later(claim, ERROR))

        async with trio.open_nursery() as nursery:
            for _ in range(3):  # the first goes alone; the replays share the next script call
                nursery.start_soon(send)
        assert replies == [True, True, True]  # a replay is told it landed
        assert await backend.requeue(claim)
        [again] = await backend.claim(1, lease=30, block=0)
        assert again.job.attempt == 2  # one attempt ended, not three
        stats = await backend.stats()
        assert (stats.processed, stats.failed, stats.retries) == (1, 1, 1)
        assert await backend.ack(again)
        record = await backend.status("J")
        assert record is not None
        assert (record.state, record.attempts) == (JobState.COMPLETED, 2)


async def test_a_job_is_a_suspect_after_its_second_dying_delivery_not_its_first(
    redis_server: RedisServer,
):
    """Planted bugs: sweep.lua's suspect threshold at d >= 1, or d >= 3."""
    clock = Clock()
    async with open_backend(redis_server, clock) as backend:
        queue = Queue(backend)
        for name in "JAB":
            await queue.enqueue(name, id=name)

        async def claim_all() -> dict[str, trioqueue.Claim]:
            return {c.job.id: c for c in await backend.claim(5, lease=MIN_IDLE, block=0)}

        async def die() -> None:  # the holder stops renewing; the sweeper recovers
            await pass_time(backend, clock, MIN_IDLE + 1)
            await backend.sweep()

        first = await backend.claim(2, lease=MIN_IDLE, block=0)
        assert sorted(c.job.id for c in first) == ["A", "J"]
        await die()
        after_one = await claim_all()  # J and A died once: they come with the rest
        assert sorted(after_one) == ["A", "B", "J"]
        assert not any(c.suspect for c in after_one.values())
        assert await backend.ack(after_one["A"])
        assert await backend.ack(after_one["B"])
        await die()  # J's second holder dies too
        await queue.enqueue("C", id="C")
        after_two = await claim_all()
        assert list(after_two) == ["J"]  # alone, though C is ready
        assert after_two["J"].suspect
        assert await backend.ack(after_two["J"])
        [c] = (await claim_all()).values()
        assert (c.job.id, c.suspect) == ("C", False)
        assert await backend.ack(c)


async def test_a_failed_attempt_with_its_outcome_is_not_a_dying_delivery(
    redis_server: RedisServer,
):
    """A retried failure, then one holder that dies: not a suspect (was: d >= 2 was enough)."""
    clock = Clock()
    async with open_backend(redis_server, clock) as backend:
        queue = Queue(backend)
        await queue.enqueue("J", id="J")
        [claim] = await backend.claim(1, lease=MIN_IDLE, block=0)
        assert await backend.retry_later(claim, None)  # failed, with its outcome
        assert await backend.requeue(claim)
        [claim] = await backend.claim(1, lease=MIN_IDLE, block=0)
        await pass_time(backend, clock, MIN_IDLE + 1)  # its holder dies
        await backend.sweep()
        await queue.enqueue("K", id="K")
        after = {c.job.id: c for c in await backend.claim(5, lease=MIN_IDLE, block=0)}
        assert sorted(after) == ["J", "K"]  # J does not run alone
        assert not after["J"].suspect
