"""The production claim path on the real clock: a wait in BLMOVE, and its cancellation.

The contract suite takes the same path on a mock clock, where Trio's deadline ends
every wait, and on the server's clock (its redis-server-clock variant); these
tests look at what the mock clock cannot show: that an idle wait ends on the
server's own timer, and the one race a cancellation has, the server having moved
a job just before the wait was called off.
"""

from __future__ import annotations

import random
import re
import uuid
from typing import TYPE_CHECKING, Any

import coredis
import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue

if TYPE_CHECKING:
    from .redis_server import RedisServer


def queue_name() -> str:
    return "{t-" + uuid.uuid4().hex[:12] + "}"


async def test_a_cancelled_wait_for_a_job_ends_at_once_and_takes_nothing(
    redis_server: RedisServer,
):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        with trio.fail_after(10):  # the wait below would last 60 s if not cut short
            with trio.move_on_after(0.05) as waiting:
                await backend.claim(1, lease=30, block=60)
        assert waiting.cancelled_caught
        await Queue(backend).enqueue("p", id="j")
        [claim] = await backend.claim(1, lease=30, block=0)  # the connection still works
        assert claim.job.id == "j"
        assert await backend.ack(claim)


async def unblocks(backend: trioqueue.RedisBackend) -> int:
    """How many ``CLIENT UNBLOCK`` the server has run: each is a cancelled wait's cost."""
    info = await backend.command("INFO", "commandstats")
    assert isinstance(info, bytes)
    found = re.search(rb"^cmdstat_client\|unblock:calls=(\d+)", info, re.M)
    return int(found[1]) if found else 0


@pytest.mark.parametrize("source", ["list", "stream"])
async def test_an_idle_wait_ends_on_the_servers_timeout_not_by_a_cancellation(
    redis_server: RedisServer, source: str
):
    """The server's timer ends an idle claim's wait (BLMOVE, XREAD BLOCK), as each
    idle poll of a pool does: a cancellation, Trio's deadline a moment after it,
    would cost a CLIENT UNBLOCK and a reply to read off every time."""
    where: dict[str, Any] = (
        {"queue": queue_name()} if source == "list" else {"stream": queue_name(), "group": "g"}
    )
    async with trioqueue.RedisBackend(redis_server.url, min_idle=30, **where) as backend:
        await backend.claim(1, lease=30, block=0)  # connected, the stream's group made
        before = await unblocks(backend)
        with trio.fail_after(10):
            for _ in range(3):
                assert await backend.claim(1, lease=30, block=0.2) == []
        assert await unblocks(backend) == before


async def cancel_once_blocked(raw: coredis.Redis[bytes], scope: trio.CancelScope) -> None:
    """Cancel *scope* once a client waits in a blocking command on the server.

    Not after a fixed time: on a busy machine the claim before the wait may take
    longer, and the cancellation would come before the wait this test is about.
    """
    with trio.fail_after(10):
        while not int((await raw.info("clients"))["blocked_clients"]):  # noqa: ASYNC110
            await trio.sleep(0.001)
    scope.cancel()


async def test_a_job_the_server_moved_just_before_the_cancellation_goes_back_first(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        keys = backend.keys
        queue = Queue(backend)
        connection = backend._conn
        unblock = connection.unblock

        async def too_late(client_id: int, beside: object = None) -> bool:
            # the race: a job arrives and the server hands it to the waiting BLMOVE
            # before the unblock does
            await queue.enqueue("first", id="first")
            with trio.fail_after(10):
                while not await raw.llen(keys.processing):  # noqa: ASYNC110 - in Redis
                    await trio.sleep(0.001)
            assert not await unblock(client_id)  # nothing blocked any more
            return False

        connection.unblock = too_late  # type: ignore[method-assign]
        with trio.CancelScope() as waiting:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_once_blocked, raw, waiting)
                await backend.claim(1, lease=30, block=60)
        assert waiting.cancelled_caught
        connection.unblock = unblock  # type: ignore[method-assign]

        assert await raw.llen(keys.processing) == 0  # not stranded there
        assert await raw.zcard(keys.claims) == 0
        await queue.enqueue("second", id="second")
        claims = await backend.claim(2, lease=30, block=0)
        assert [c.job.id for c in claims] == ["first", "second"]  # its turn kept


async def test_claims_cancelled_at_random_moments_lose_and_strand_nothing(
    redis_server: RedisServer,
):
    rng = random.Random(7)
    jobs = 60
    claimed: list[str] = []
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue = Queue(backend)
        for n in range(jobs):
            async with trio.open_nursery() as nursery:

                async def produce(n: int = n) -> None:
                    await trio.sleep(rng.random() * 0.002)
                    await queue.enqueue(n, id=str(n))

                nursery.start_soon(produce)
                with trio.move_on_after(rng.random() * 0.002):
                    claimed += [c.job.id for c in await backend.claim(1, lease=30, block=5)]
        while len(claimed) < jobs:  # what the cancelled waits put back is still there
            with trio.fail_after(10):
                claimed += [c.job.id for c in await backend.claim(jobs, lease=30, block=1)]
        info = await backend.inspect()
    assert sorted(claimed, key=int) == [str(n) for n in range(jobs)]
    assert (info.processing, info.claims, info.ready) == (0, jobs, 0)  # all registered


async def test_a_pool_stops_as_soon_as_its_last_job_is_done_not_after_its_poll(
    redis_server: RedisServer,
):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        done: list[str] = []

        async def handler(job: trioqueue.Job) -> None:
            done.append(job.id)

        with trio.fail_after(10):  # each claim below waits up to 60 s for work
            async with trioqueue.open_worker_pool(backend, handler, poll_interval=60):
                await Queue(backend).enqueue("p", id="j")
            async with trioqueue.open_worker_pool(backend, handler, poll_interval=60) as pool:
                await pool.shutdown(grace=5)  # an idle pool: its wait ends at once
        assert done == ["j"]


async def test_a_wait_whose_connection_is_killed_is_an_outage_not_a_crash(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        await backend.pending()  # connected

        async def kill_when_blocked() -> None:
            with trio.fail_after(10):
                while not any(c["cmd"] == "blmove" for c in await raw.client_list()):  # noqa: ASYNC110 - in Redis
                    await trio.sleep(0.01)
            await raw.client_kill(type_=coredis.tokens.PureToken.NORMAL, skipme=True)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_when_blocked)
                with pytest.raises(trioqueue.BackendUnavailable):
                    await backend.claim(1, lease=30, block=30)


async def test_a_job_put_back_after_a_cancelled_wait_never_overfills_the_queue(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(
            redis_server.url, queue=queue_name(), min_idle=30, capacity=1
        ) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        keys = backend.keys
        queue = Queue(backend)
        unblock = backend._conn.unblock

        async def too_late(client_id: int, beside: object = None) -> bool:
            await queue.enqueue("first", id="first")  # the waiting BLMOVE takes it
            with trio.fail_after(10):
                while not await raw.llen(keys.processing):  # noqa: ASYNC110 - in Redis
                    await trio.sleep(0.001)
            await queue.enqueue("second", id="second")  # into the room it left
            assert not await unblock(client_id)
            return False

        backend._conn.unblock = too_late  # type: ignore[method-assign]
        with trio.move_on_after(0.05):
            await backend.claim(1, lease=30, block=60)
        backend._conn.unblock = unblock  # type: ignore[method-assign]

        assert await raw.llen(keys.ready) == 1  # the capacity holds
        first = await backend.status("first")
        assert first is not None
        assert not first.queued  # stored, first in line for the next room
        claims = await backend.claim(1, lease=30, block=0)
        claims += await backend.claim(1, lease=30, block=0)
        assert sorted(c.job.id for c in claims) == ["first", "second"]


async def test_requeue_dead_returns_the_record_as_requeued_though_a_waiting_pool_takes_it(
    redis_server: RedisServer,
):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue = Queue(backend)
        await queue.enqueue("p", id="j")
        [claim] = await backend.claim(1, lease=30, block=0)
        assert await backend.dead_letter(claim, None, "to requeue")
        status = backend.status
        taken: list[trioqueue.Claim] = []

        async def read_after_a_claim(job_id: str) -> trioqueue.JobRecord | None:
            taken.extend(await backend.claim(1, lease=30, block=0))  # a waiting pool wins
            return await status(job_id)

        backend.status = read_after_a_claim  # type: ignore[method-assign]
        requeued = await queue.requeue_dead("j")
        backend.status = status  # type: ignore[method-assign]
        assert (requeued.state, requeued.attempts, requeued.queued) == (JobState.RECEIVED, 0, True)
