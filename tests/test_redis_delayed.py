"""Delayed jobs on Redis: the scheduled set, the server's clock and the wake element.

The contract suite (tests/contract/test_delayed.py) covers what every backend does;
these cover what only Redis has: due times on the server's clock, the wake element
an idle consumer's ``BLMOVE`` takes (and which takes no room), a stream source's
refusal, and the key TTL.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import TYPE_CHECKING

import coredis
import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue

from .redis_time import Clock, pass_time

if TYPE_CHECKING:
    from .redis_server import RedisServer


def queue_name() -> str:
    return "{d-" + uuid.uuid4().hex[:10] + "}"


async def test_an_idle_consumer_takes_a_job_at_its_due_time_on_the_servers_clock(
    redis_server: RedisServer,
):
    """Real time: the server's clock and its BLMOVE timeout are the subject."""
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue = Queue(backend)
        got: list[trioqueue.Claim] = []
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                got.extend(await backend.claim(1, lease=30, block=20))

            nursery.start_soon(wait)
            await trio.sleep(0.2)  # the consumer waits in BLMOVE on an empty list
            begin = time.monotonic()
            due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
            assert (await queue.enqueue("a", id="a", at=due)).scheduled
        waited = time.monotonic() - begin
        assert [claim.job.id for claim in got] == ["a"]
        # woken by the wake element, it waited out the due time, not its 20 s block
        assert 0.8 < waited < 3.0, waited
        assert (await backend.stats()).gauges.queue_depth == 0  # the wake element is gone


async def test_the_wake_element_takes_no_room_and_is_no_job(redis_server: RedisServer):
    clock = Clock()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), capacity=1, min_idle=5, clock=clock
    ) as backend:
        queue = Queue(backend)
        keys = backend.keys
        await queue.enqueue("later", id="later", delay=60)  # the list was empty: a wake element
        client = coredis.Redis.from_url(redis_server.url)
        async with client:
            assert await client.llen(keys.ready) == 1
            # it takes no room: the one place of the ready list is still free
            await queue.try_enqueue("now", id="now")
            gauges = (await backend.stats()).gauges
            assert (gauges.queue_depth, gauges.scheduled) == (1, 1)
            assert await backend.pending() == 2
            [claim] = await backend.claim(5, lease=5, block=0)  # the wake element is skipped
            assert claim.job.id == "now"
            assert await backend.ack(claim)

            # a consumer's BLMOVE moved a wake element, and it died before its claim
            await queue.enqueue("sooner", id="sooner", delay=30)  # the next due: wakes again
            element = await client.lmove(keys.ready, keys.processing, "RIGHT", "LEFT")
            assert element == b"\0"
            await backend.sweep()  # stamps it
            await pass_time(backend, clock, 6)
            await backend.sweep()  # forgets it: nothing to recover, nothing to adopt
            assert await client.llen(keys.processing) == 0
            snap = await backend.stats()
            assert (snap.enqueued, snap.recovered, snap.dead_lettered) == (3, 0, 0)
            assert (snap.gauges.queue_depth, snap.gauges.scheduled) == (0, 2)
            assert snap.conserved
            await pass_time(backend, clock, 30)
            [claim] = await backend.claim(5, lease=5, block=0)
            assert claim.job.id == "sooner"


async def test_a_due_job_that_expired_with_the_key_ttl_is_counted_not_run(
    redis_server: RedisServer,
):
    clock = Clock()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), key_ttl=600, clock=clock, min_idle=30
    ) as backend:
        queue = Queue(backend)
        await queue.enqueue("x", id="x", delay=100)
        client = coredis.Redis.from_url(redis_server.url)
        async with client:
            ttl = await client.pttl(backend.keys.job_prefix + "x")
            assert 1_290_000 < ttl <= 1_300_000  # until due, and two key TTLs beyond
            await client.delete([backend.keys.job_prefix + "x"])  # as if its TTL ran out
        await pass_time(backend, clock, 101)
        assert await backend.claim(1, lease=5, block=0) == []
        snap = await backend.stats()
        assert (snap.expired, snap.gauges.scheduled) == (1, 0)
        assert snap.conserved


async def test_a_stream_source_refuses_a_delay_and_stores_nothing(redis_server: RedisServer):
    stream = "{s-" + uuid.uuid4().hex[:10] + "}"
    async with trioqueue.RedisBackend(
        redis_server.url, stream=stream, group="g", min_idle=30
    ) as backend:
        queue = Queue(backend)
        with pytest.raises(ValueError, match="cannot hold a job until a due time"):
            await queue.enqueue("x", id="x", delay=5)
        assert await queue.status("x") is None
        assert await backend.pending() == 0


async def test_a_scheduled_record_reads_back_with_its_due_time(redis_server: RedisServer):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue = Queue(backend)
        await queue.enqueue({"n": 1}, id="j", delay=3600)
        record = await queue.status("j")
        assert record is not None
        assert (record.state, record.queued, record.attempts) == (JobState.SCHEDULED, False, 0)
        assert record.due_at is not None
        assert record.due_at - record.created_at == pytest.approx(3600, abs=0.01)
        assert abs(record.created_at - time.time()) < 5  # the server's wall clock
