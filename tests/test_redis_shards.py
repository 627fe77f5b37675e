"""Sharded queues: one logical queue over several Redis queues, on a real server.

On one server the shards share it; on the local cluster (tests/test_redis_cluster.py)
they spread over the masters. What is checked here holds either way: each id has
one shard, claims reach every shard, and the counts add up.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import ConfigurationError, IdempotencyConflict, Queue, ShardedBackend
from trioqueue._backends.redis._shards import shard_names

from .test_cli_redis import Target, Worker

if TYPE_CHECKING:
    from .redis_server import RedisServer


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Jump only after 20 ms with every task blocked: a Redis reply may be on its way."""
    return trio.testing.MockClock(autojump_threshold=0.02)


def logical() -> str:
    return f"thumbs-{uuid.uuid4().hex[:8]}"


def sharded(server: RedisServer, name: str, shards: int = 3, **options: object) -> ShardedBackend:
    return ShardedBackend.on_redis(
        server.url, queue=name, shards=shards, min_idle=30, clock=trio.current_time, **options
    )


def test_each_shard_has_a_hash_tag_of_its_own():
    assert shard_names("thumbnails", 3) == ["{thumbnails:0}", "{thumbnails:1}", "{thumbnails:2}"]
    assert shard_names("{thumbnails}", 2) == ["{thumbnails:0}", "{thumbnails:1}"]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"shards": 0}, "whole number from 1 to 1024"),
        ({"shards": True}, "whole number from 1 to 1024"),
        ({"shards": 2, "stream": "s"}, "not sharded"),
        ({"shards": 2, "capacity": 0}, "capacity"),
    ],
)
def test_bad_shard_settings_are_refused(options, match):
    with pytest.raises(ConfigurationError, match=match):
        ShardedBackend.on_redis("redis://localhost:1", queue="q", **options)


def test_the_capacity_is_the_total_split_between_the_shards():
    backend = ShardedBackend.on_redis("redis://localhost:1", queue="q", shards=3, capacity=10)
    assert [shard.capacity for shard in backend.shards] == [4, 4, 4]
    assert backend.capacity == 12


async def test_each_id_lives_on_one_shard_and_stays_idempotent(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    async with sharded(redis_server, logical()) as backend:
        queue = Queue(backend)
        ids = [f"job-{n}" for n in range(60)]
        for job_id in ids:
            await queue.enqueue({"id": job_id}, id=job_id)
        for job_id in ids:  # each on the shard its id picks, and only there
            holders = [s for s in backend.shards if await s.status(job_id) is not None]
            assert holders == [backend.shard_for(job_id)]
        by_shard = Counter(backend.shard_for(job_id).keys.ready for job_id in ids)
        assert len(by_shard) == 3  # every shard got some
        again = await queue.enqueue({"id": "job-7"}, id="job-7")
        assert again.deduplicated
        with pytest.raises(IdempotencyConflict):
            await queue.enqueue({"id": "other"}, id="job-7")
        results = await queue.enqueue_many([{"id": "job-8"}, {"n": 1}], ids=["job-8", "new"])
        assert [r.deduplicated for r in results if isinstance(r, trioqueue.Receipt)] == [
            True,
            False,
        ]
        stats = await backend.stats()
        assert (stats.enqueued, stats.deduplicated, stats.conflicts) == (61, 2, 1)
        assert stats.gauges.queue_depth == 61 == await backend.pending()


async def test_the_shard_count_is_stored_with_the_queue_and_another_is_refused(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    name = logical()
    async with sharded(redis_server, name, shards=2) as backend:
        await Queue(backend).enqueue_many(list(range(10)), ids=[f"j{n}" for n in range(10)])
    for other in (3, 1):  # ids would move to other shards: refused before anything is done
        with pytest.raises(ConfigurationError) as refused:
            async with sharded(redis_server, name, shards=other):
                raise AssertionError("opened with another shard count")
        said = str(refused.value)
        assert f"spread over 2 shards; this process asked for {other}" in said
        assert "shards=2" in said
        assert "--shards 2" in said
    async with sharded(redis_server, name, shards=2) as backend:  # the same count joins
        assert await backend.pending() == 10
    async with sharded(redis_server, logical(), shards=3) as fresh:  # a new queue: stored
        first = fresh.shards[0]
        assert await first.command("HGET", first.keys.config, "shards") == b"3"


async def test_a_pool_runs_every_shards_jobs_and_the_counts_add_up(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    runs: Counter[str] = Counter()

    async def handler(job: trioqueue.Job) -> None:
        runs[job.id] += 1
        if job.payload % 10 == 0:
            raise ValueError("never works")

    policy = trioqueue.RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=0.5)
    async with sharded(redis_server, logical()) as backend:
        await Queue(backend).enqueue_many(list(range(50)), ids=[f"j{n}" for n in range(50)])
        async with trioqueue.open_worker_pool(backend, handler, workers=4, retry=policy):
            pass
        failing = {f"j{n}" for n in range(0, 50, 10)}
        assert runs == Counter({job: 2 if job in failing else 1 for job in runs})
        assert set(runs) == {f"j{n}" for n in range(50)}
        stats = await backend.stats()
        assert (stats.succeeded, stats.dead_lettered, stats.gauges.held) == (45, 5, 0)
        assert stats.conserved
        dead = await backend.dead_letters()
        assert {record.id for record in dead} == failing
        assert len({backend.shard_for(job).keys.ready for job in failing}) > 1  # across shards
        assert [r.updated_at for r in dead] == sorted(r.updated_at for r in dead)
        requeued = await backend.requeue_dead("j10")
        assert requeued.state is trioqueue.JobState.RECEIVED
        assert await backend.purge_dead("j20") == 1
        assert await backend.purge_dead() == 3  # the rest, from every shard
        info = await backend.inspect()
        assert (info.ready, info.dead) == (1, 0)


async def test_no_shard_starves_while_another_is_full(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    """One worker taking one job at a time: a shard with a long backlog does not keep
    the others waiting; each claim starts at the next shard."""
    async with sharded(redis_server, logical()) as backend:
        busy = backend.shards[0]
        crowd = [job for job in (f"c{n}" for n in range(400)) if backend.shard_for(job) is busy]
        few = [job for job in (f"f{n}" for n in range(400)) if backend.shard_for(job) is not busy]
        crowd, few = crowd[:60], few[:6]
        await Queue(backend).enqueue_many([0] * len(crowd), ids=crowd)
        await Queue(backend).enqueue_many([0] * len(few), ids=few)
        order: list[str] = []

        async def handler(job: trioqueue.Job) -> None:
            order.append(job.id)

        async with trioqueue.open_worker_pool(
            backend, handler, workers=1, prefetch=0, batch_size=1
        ):
            pass
        assert sorted(order) == sorted(crowd + few)
        last_of_few = max(order.index(job) for job in few)
        assert last_of_few < 3 * len(few)  # not after the 60 of the crowded shard


async def test_an_idle_pool_is_woken_by_a_job_on_any_shard(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    async with sharded(redis_server, logical()) as backend:
        started: dict[str, float] = {}
        ran = trio.Event()

        async def handler(job: trioqueue.Job) -> None:
            started[job.id] = trio.current_time()
            ran.set()

        async with trioqueue.open_worker_pool(backend, handler, poll_interval=5.0):
            for shard in range(3):
                job_id = next(
                    job
                    for job in (f"w{shard}-{n}" for n in range(100))
                    if backend.shard_for(job) is backend.shards[shard]
                )
                await trio.sleep(2.0)  # the pool waits on every shard meanwhile
                sent, ran = trio.current_time(), trio.Event()
                await Queue(backend).enqueue(shard, id=job_id)
                await ran.wait()
                # woken by the shard's own wait, not found by the next look 5 s later
                assert started[job_id] - sent < 1.0
        stats = await backend.stats()
        assert (stats.succeeded, stats.released, stats.gauges.held) == (3, 0, 0)


class ShardedTarget(Target):
    """A logical queue of three shards; every command names it with ``--shards 3``."""

    options = ("--shards", "3")


def test_the_command_line_takes_the_logical_name_and_the_shard_count(redis_server: RedisServer):
    target = ShardedTarget(redis_server)
    target.enqueue_lines(6)
    stats = target.stats()
    assert (stats["ready"], stats["counters"]["enqueued"]) == (6, 6)
    unsharded = Target(redis_server)
    unsharded.queue = target.queue  # the same name without --shards: another queue
    unsharded.assert_untouched()
    worker = Worker(target, "cli_handlers:failing", "--max-attempts", "1", "--shards", "3")
    try:
        target.wait_for_dead_letters(6)
        worker.signal(signal.SIGTERM)
        assert worker.exit_status() == 0
    finally:
        worker.close()
    listed = target.run("dead", "list", "--no-header")
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()) == [
        f"j{n}" for n in range(6)
    ]
    assert target.run("dead", "requeue", "j4").stdout == "j4 requeued\n"
    assert target.run("dead", "purge", "--all").stdout == "purged 5\n"
    stats = target.stats()
    assert (stats["dead"], stats["ready"]) == (0, 1)


async def test_settings_show_and_change_the_total_capacity(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    async with sharded(redis_server, logical(), capacity=6) as backend:
        await Queue(backend).enqueue("x")
        stored = await backend.stored_settings()
        assert stored is not None
        assert stored.capacity == 6 == backend.capacity
        changed = await backend.configure(capacity=30)
        assert changed.capacity == 30
        assert [(await shard.stored_settings()).capacity for shard in backend.shards] == [10] * 3


async def test_a_rate_limit_is_refused_and_none_is_what_a_sharded_queue_has(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    async with sharded(redis_server, logical()) as backend:
        queue = Queue(backend)
        with pytest.raises(ConfigurationError, match="cannot keep a rate limit"):
            await queue.set_rate_limits(queue=trioqueue.RateLimit(10))
        await queue.set_rate_limits()  # none: nothing to keep
        assert await queue.rate_limits() == trioqueue.RateLimits()
        receipt = await queue.enqueue("x", rate_key="customer-1")  # kept, limits nothing
        record = await queue.status(receipt.id)
        assert record is not None
        assert record.rate_key == "customer-1"


async def twenty_jobs(backend: ShardedBackend) -> None:
    """Enqueue jobs ``job-0`` to ``job-19``: every shard of two gets some."""
    queue = Queue(backend)
    for n in range(20):
        await queue.enqueue(n, id=f"job-{n}")


async def test_a_claim_cancelled_between_two_shards_leaves_no_claim_behind(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    async with sharded(redis_server, logical(), shards=2) as backend:
        await twenty_jobs(backend)
        first = backend.shards[backend._turn]
        claim_first = first.claim
        with trio.CancelScope() as scope:

            async def then_cancel(
                max_jobs: int, *, lease: float, block: float
            ) -> list[trioqueue.Claim]:
                got = await claim_first(max_jobs, lease=lease, block=block)
                scope.cancel()  # after the first shard's claim, before the second's
                return got

            first.claim = then_cancel  # type: ignore[method-assign]
            claims = await backend.claim(20, lease=30, block=0)
        del first.claim
        # what was claimed reached the caller: nothing is held that it does not know of
        assert not scope.cancelled_caught
        assert len(claims) == 20
        assert (await backend.stats()).gauges.inflight == 20


async def test_a_claim_cancelled_while_it_gives_back_another_shards_find_keeps_its_own(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    """Two shards' waits both find a job; giving back the second's, a cancellation comes."""
    async with sharded(redis_server, logical(), shards=2) as backend:
        await twenty_jobs(backend)
        scope = trio.CancelScope()
        for shard in backend.shards:
            real_claim, real_release = shard.claim, shard.release

            async def claim(
                max_jobs: int, *, lease: float, block: float, real: Any = real_claim
            ) -> list[trioqueue.Claim]:
                if block == 0:
                    return []  # the first pass finds nothing: the claim waits on both
                with trio.CancelScope(shield=True):  # both waits find their job
                    return list(await real(1, lease=lease, block=0))

            async def release(claims: Any, real: Any = real_release) -> int:
                scope.cancel()  # while the other shard's find goes back
                return int(await real(claims))

            shard.claim = claim  # type: ignore[method-assign]
            shard.release = release  # type: ignore[method-assign]
        with scope:
            claims = await backend.claim(20, lease=30, block=5)
        for shard in backend.shards:
            del shard.claim, shard.release
        assert len(claims) == 1  # the first shard's find reached the caller
        assert (await backend.stats()).gauges.inflight == 1  # the other's went back
        assert await backend.ack(claims[0])


@pytest.mark.parametrize("call", ["renew", "release", "add_many"])
async def test_a_call_with_nothing_to_do_is_still_a_checkpoint(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock, call: str
):
    async with sharded(redis_server, logical(), shards=2) as backend:
        calls = {
            "renew": lambda: backend.renew([], lease=30),
            "release": lambda: backend.release([]),
            "add_many": lambda: backend.add_many([], trioqueue.AddMode.NOWAIT),
        }
        with trio.CancelScope() as scope:
            scope.cancel()
            await calls[call]()
        assert scope.cancelled_caught


async def test_a_sweep_adds_up_every_count_of_the_shards(redis_server: RedisServer):
    """Due jobs included: Redis keeps due times on its own clock, so this waits for it."""
    async with sharded(redis_server, logical(), shards=2) as backend:
        queue = Queue(backend)
        for n in range(4):  # due in 0.2 s of the server's clock
            await queue.enqueue(n, id=f"later-{n}", delay=0.2)
        due = 0
        with trio.fail_after(10):
            while due < 4:
                due += (await backend.sweep()).due
                await trio.sleep(0.05)
        assert due == 4
        assert (await backend.stats()).gauges.queue_depth == 4
