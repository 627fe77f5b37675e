"""Waiting for results on Redis: the events stream, marks on records, no polling.

The contract suite (tests/contract/test_results.py) covers what every backend
does; these cover how Redis does it: only jobs someone waits for send an event,
one blocking read serves every waiter of a process, a lost event is found by a
look again, and a sharded queue's waits reach every shard.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import coredis
import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import Queue, ShardedBackend

if TYPE_CHECKING:
    from .redis_server import RedisServer


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Jump only after 20 ms with every task blocked: a Redis reply may be on its way."""
    return trio.testing.MockClock(autojump_threshold=0.02)


def queue_name() -> str:
    return "{r-" + uuid.uuid4().hex[:10] + "}"


async def echo(job: trioqueue.Job) -> object:
    return job.payload


def raw(server: RedisServer) -> coredis.Redis[bytes]:
    return coredis.Redis.from_url(server.url)


async def test_only_jobs_someone_waits_for_send_an_event(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, clock=trio.current_time, min_idle=30
    ) as b:
        queue = Queue(b)
        await queue.enqueue_many(list(range(20)), ids=[f"j{n}" for n in range(20)])
        async with trioqueue.open_worker_pool(b, echo):
            pass
        async with raw(redis_server) as redis:
            assert await redis.exists([b.keys.events]) == 0  # nobody waited: no event
            await queue.enqueue(99, id="waited")
            async with trio.open_nursery() as nursery:

                async def wait() -> None:
                    assert await queue.result("waited") == 99

                nursery.start_soon(wait)
                await trio.sleep(1)
                assert await redis.hget(f"{name}.job:waited", "wt") == b"1"  # marked
                async with trioqueue.open_worker_pool(b, echo):
                    pass
            entries = await redis.xrange(b.keys.events)
            assert [entry.field_values for entry in entries] == [{b"id": b"waited"}]
            assert 0 < await redis.ttl(b.keys.events) <= 3600  # it goes when unused


async def test_a_wait_does_not_poll_redis(redis_server: RedisServer):
    """Real time: the server's XREAD timer is the subject. Ten waiters, one blocked read."""
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue = Queue(backend)
        ids = [f"w{n}" for n in range(10)]
        await queue.enqueue_many(ids, ids=ids)
        async with raw(redis_server) as redis, trio.open_nursery() as nursery:
            for job_id in ids:
                nursery.start_soon(queue.result, job_id)
            prefix = backend.keys.job_prefix

            async def settled() -> bool:
                """Every waiter has marked its job, and one reads for all (blocked in XREAD)."""
                marked = [await redis.hget(prefix + job_id, "wt") for job_id in ids]
                blocked = int((await redis.info("clients"))["blocked_clients"])
                return all(marked) and blocked == 1

            with trio.fail_after(10):
                # the server's state, which no Trio event reports: looked at until true
                while not await settled():  # noqa: ASYNC110
                    await trio.sleep(0.01)
            before = int((await redis.info("stats"))["total_commands_processed"])
            await trio.sleep(1.5)
            after = int((await redis.info("stats"))["total_commands_processed"])
            nursery.cancel_scope.cancel()
        # the INFO calls themselves, and nothing else: no waiter asked meanwhile
        assert after - before <= 3, after - before


async def test_a_lost_event_is_found_by_a_look_again(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    """A job finished without an event (a restarted Redis lost it): found within 5 s."""
    name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, clock=trio.current_time, min_idle=30
    ) as b:
        queue = Queue(b)
        await queue.enqueue("p", id="quiet")
        async with raw(redis_server) as redis, trio.open_nursery() as nursery:
            done: list[float] = []

            async def wait() -> None:
                await queue.result("quiet")
                done.append(trio.current_time())

            nursery.start_soon(wait)
            await trio.sleep(1)
            finished_at = trio.current_time()
            # finished behind trioqueue's back: no event is sent
            await redis.hset(f"{name}.job:quiet", {"s": "completed", "res": '"late"'})
            await trio.sleep(10)
            assert done, "the wait never looked again"
            assert done[0] - finished_at <= 5.5
        assert await queue.result("quiet") == "late"


async def test_results_of_a_sharded_queue_come_from_every_shard(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    backend = ShardedBackend.on_redis(
        redis_server.url,
        queue=f"s-{uuid.uuid4().hex[:8]}",
        shards=3,
        clock=trio.current_time,
        min_idle=30,
    )
    async with backend:
        queue = Queue(backend)
        ids = [f"job-{n}" for n in range(12)]
        assert len({backend.shard_for(job_id).keys.ready for job_id in ids}) == 3
        await queue.enqueue_many([{"n": n} for n in range(12)], ids=ids)
        got: dict[str, object] = {}
        async with trio.open_nursery() as nursery:

            async def work() -> None:
                await trio.sleep(1)
                async with trioqueue.open_worker_pool(backend, echo, workers=4):
                    pass

            nursery.start_soon(work)
            async with queue.results(ids) as results:
                async for job_id, outcome in results:
                    got[job_id] = outcome.unwrap()
        assert got == {f"job-{n}": {"n": n} for n in range(12)}
