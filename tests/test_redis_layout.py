"""The Redis key layout keeps every script's work bounded, whatever the jobs in flight.

Claimed jobs live in sorted sets (lease expiry, claim time) and a set (retry
waits), never in a list a script must walk; sweeps, fills and purges of many do
a slice per script call and call again. These tests look at the keys and count
the script calls.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import coredis
import pytest

import trioqueue
from trioqueue import Queue

from .redis_time import Clock, pass_time

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .redis_server import RedisServer

SLICE = 1000  # lua/prelude/2-ready.lua: most elements one script call moves or examines
RECOVERY_SLICE = 200  # lua/sweep.lua: most expired claims one sweep call recovers
CLAIM_SLICE = 100  # lua/claim.lua: most jobs one claim call takes
MARK = b"\x00"  # the first byte of a list element that names a job


def queue_name() -> str:
    return "{l-" + uuid.uuid4().hex[:12] + "}"


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[coredis.Redis[bytes]]:
    client: coredis.Redis[bytes] = coredis.Redis.from_url(redis_server.url)
    async with client:
        yield client


async def claim_all(backend: trioqueue.RedisBackend, lease: float) -> list[trioqueue.Claim]:
    """Claim every ready job, a call per slice."""
    claims: list[trioqueue.Claim] = []
    while more := await backend.claim(10 * CLAIM_SLICE, lease=lease, block=0):
        assert len(more) <= CLAIM_SLICE
        claims += more
    return claims


def record_replies(backend: trioqueue.RedisBackend, script: str) -> list[Any]:
    """Record every reply of *script* the backend gets from now on."""
    replies: list[Any] = []
    conn = backend._conn
    run = conn.run

    async def recording(name: str, *args: str | bytes | float) -> Any:
        reply = await run(name, *args)
        if name == script:
            replies.append(reply)
        return reply

    conn.run = recording  # type: ignore[method-assign]
    return replies


@pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "simple"])
async def test_claimed_jobs_live_in_sets_and_the_gauges_read_them(
    redis_server: RedisServer, raw: coredis.Redis[bytes], reliable: bool
):
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=30, reliable=reliable
    ) as backend:
        keys, queue = backend.keys, Queue(backend)
        for n in range(50):
            await queue.enqueue(n, id=f"j{n}")
        claims = await backend.claim(50, lease=30, block=0)
        assert len(claims) == 50
        assert await raw.llen(keys.processing) == 0  # nothing there grows with the claims
        assert (await raw.zcard(keys.claims), await raw.zcard(keys.held)) == (50, 50)
        for claim in claims[:10]:
            assert await backend.retry_later(claim, None)
        assert await raw.scard(keys.retrying) == 10
        gauges = (await backend.stats()).gauges
        assert (gauges.inflight, gauges.retry_waiting, await backend.pending()) == (40, 10, 50)
        for claim in claims[:5]:
            assert await backend.requeue(claim)  # back on the queue: no longer waiting
        assert await backend.release(claims[5:10]) == 5  # given back while waiting
        for claim in claims[10:]:
            assert await backend.ack(claim)
        gauges = (await backend.stats()).gauges
        assert (gauges.inflight, gauges.retry_waiting, gauges.queue_depth) == (0, 0, 10)
        for key in (keys.claims, keys.held, keys.retrying):
            assert not await raw.exists([key])  # emptied: nothing left behind


async def test_a_sweep_recovers_claims_a_slice_per_call(redis_server: RedisServer):
    clock = Clock()
    total = 2 * RECOVERY_SLICE + RECOVERY_SLICE // 2
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), capacity=total, min_idle=5, clock=clock
    ) as backend:
        queue = Queue(backend)
        for n in range(total):
            await queue.enqueue(n, id=f"j{n}")
        assert len(await claim_all(backend, lease=5)) == total
        await pass_time(backend, clock, 6)  # every lease runs out: the workers died
        replies = record_replies(backend, "sweep")
        report = await backend.sweep()
        assert report.recovered == total
        assert [int(reply[1]) for reply in replies] == [
            RECOVERY_SLICE,
            RECOVERY_SLICE,
            RECOVERY_SLICE // 2,
        ]
        assert [int(reply[3]) for reply in replies] == [1, 1, 0]  # 'more' until done
        info = await backend.inspect()
        assert (info.ready, info.claims, info.oldest_claim_age) == (total, 0, None)
        assert (await backend.stats()).conserved


async def test_purging_every_dead_letter_goes_a_slice_per_call(
    redis_server: RedisServer, raw: coredis.Redis[bytes]
):
    total = SLICE + 7
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), capacity=total, min_idle=30
    ) as backend:
        queue = Queue(backend)
        for n in range(total):
            await queue.enqueue(n, id=f"j{n}")
        for claim in await claim_all(backend, lease=30):
            assert await backend.dead_letter(claim, None, "no")
        replies = record_replies(backend, "purge_dead")
        assert await backend.purge_dead() == total
        assert [int(reply) for reply in replies] == [SLICE, 7, 0]
        assert await raw.llen(backend.keys.dead) == 0
        assert await backend.status("j0") is None  # the records went too


async def test_stored_jobs_move_up_into_new_room_a_slice_per_call(redis_server: RedisServer):
    total = SLICE + SLICE // 2 + 10
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), capacity=10, min_idle=30
    ) as backend:
        queue = Queue(backend)
        for n in range(total):
            await queue.submit(n, id=f"j{n}")
        await backend.configure(capacity=total)  # moves one slice at once
        info = await backend.inspect()
        assert (info.ready, info.stored) == (10 + SLICE, SLICE // 2)
        replies = record_replies(backend, "sweep")
        assert (await backend.sweep()).scheduled == SLICE // 2
        assert [int(reply[0]) for reply in replies] == [SLICE // 2]
        info = await backend.inspect()
        assert (info.ready, info.stored) == (total, 0)


async def test_the_oldest_claim_is_told_by_its_claim_time_not_its_last_renewal(
    redis_server: RedisServer,
):
    clock = Clock()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=30, clock=clock
    ) as backend:
        queue = Queue(backend)
        await queue.enqueue("a", id="a")
        await queue.enqueue("b", id="b")
        [first] = await backend.claim(1, lease=30, block=0)
        clock.now += 20
        await backend.renew([first], lease=30)
        clock.now += 5
        [second] = await backend.claim(1, lease=30, block=0)
        clock.now += 5
        assert (await backend.inspect()).oldest_claim_age == pytest.approx(30)
        assert await backend.ack(first)
        assert (await backend.inspect()).oldest_claim_age == pytest.approx(5)
        assert await backend.ack(second)
        assert (await backend.inspect()).oldest_claim_age is None


async def test_a_claim_left_in_the_processing_list_by_an_older_version_drains(
    redis_server: RedisServer, raw: coredis.Redis[bytes]
):
    """Before this layout, every reliable claim also sat in the processing list."""
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue, keys = Queue(backend), backend.keys
        await queue.enqueue("x", id="x")
        [claim] = await backend.claim(1, lease=30, block=0)
        await raw.lpush(keys.processing, [MARK + b"x"])  # as the old claim script left it
        assert await backend.pending() == 1  # counted once: its lease is in the claims set
        assert (await backend.stats()).gauges.inflight == 1
        await backend.sweep()  # the entry has a lease: nothing to stamp, nothing to recover
        assert await raw.zcard(keys.claims) == 1
        assert await backend.ack(claim)
        assert await raw.llen(keys.processing) == 0
        assert await backend.pending() == 0
        assert (await backend.stats()).conserved


async def test_one_claim_call_takes_at_most_a_slice(redis_server: RedisServer):
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), capacity=1000, min_idle=30
    ) as backend:
        queue = Queue(backend)
        for n in range(CLAIM_SLICE + 50):
            await queue.enqueue(n, id=f"j{n}")
        assert len(await backend.claim(1000, lease=30, block=0)) == CLAIM_SLICE
        assert len(await backend.claim(1000, lease=30, block=0)) == 50
        assert await backend.claim(1000, lease=30, block=0) == []
