"""Redis-specific behaviour, on a private server (the contract suite covers the rest)."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any

import coredis
import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import ConfigurationError, JobState, Queue

from .redis_time import pass_time

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .redis_server import RedisServer


def queue_name() -> str:
    return "{t-" + uuid.uuid4().hex[:12] + "}"


def test_the_backend_names_the_extra_when_no_redis_client_is_installed():
    code = (
        "import sys\n"
        "sys.modules['hiredis'] = None\n"
        "import trioqueue\n"
        "trioqueue.RedisBackend('redis://localhost', queue='{q}', min_idle=30)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRIOQUEUE_REDIS_CLIENT"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: trioqueue.RedisBackend needs hiredis, the Redis reply parser: pip install "
        "'trioqueue[redis]' (in a checkout: pip install '.[redis]')"
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"queue": "{q}", "min_idle": 0}, r"min_idle=0\): use a number of seconds from 0.001"),
        ({"queue": "{q}", "min_idle": 1e300}, r"min_idle=1e\+300\): .* \(a century\)"),
        ({"queue": "{q}", "min_idle": 30, "key_ttl": 1e15}, r"key_ttl=1e\+?15|key_ttl=10{15}"),
        (
            {"queue": "{q}", "min_idle": 30, "retention": trioqueue.Retention(max_age=math.inf)},
            r"max_age=inf\)\): Redis keeps a record at most .* use max_age=None",
        ),
        ({"queue": "{q}", "min_idle": 10, "recovery_ttl": 10}, r"must exceed min_idle"),
        ({"queue": "{q}", "min_idle": 30, "capacity": 0}, r"capacity=0"),
        ({"queue": "{q}", "min_idle": 30, "key_ttl": 0}, r"key_ttl=0\): use a number of seconds"),
        ({"queue": "{q}", "min_idle": 30, "max_deliveries": 0}, r"max_deliveries=0.*>= 1"),
        (
            {"queue": "{q}", "reliable": False, "recovery_zset": "{q}.claims"},
            r"a simple queue never redelivers.*drop recovery_zset",
        ),
    ],
)
def test_bad_configuration_refuses_to_start_with_the_fix(options, match):
    with pytest.raises(ConfigurationError, match=match):
        trioqueue.RedisBackend("redis://127.0.0.1:1/0", **options)


async def test_a_pool_on_redis_completes_retries_and_dead_letters(redis_server: RedisServer):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        queue = Queue(backend)

        async def handler(job: trioqueue.Job) -> None:
            if job.payload["fail"] and job.attempt < job.payload["fail"]:
                raise RuntimeError(f"attempt {job.attempt}")

        retry = trioqueue.RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.01)
        async with trioqueue.open_worker_pool(backend, handler, retry=retry, poll_interval=0.2):
            for i in range(30):
                await queue.enqueue({"fail": i % 3}, id=str(i))  # 0: ok, 1: ok, 2: fails once
            await queue.enqueue({"fail": 5}, id="doomed")
        stats = await backend.stats()
        assert (stats.enqueued, stats.succeeded, stats.dead_lettered) == (31, 30, 1)
        assert stats.retries == 10 + 1
        assert stats.conserved
        [dead] = await queue.dead_letters()
        assert (dead.id, dead.attempts, dead.state) == ("doomed", 2, JobState.FAILED)
        assert dead.last_error is not None
        assert dead.last_error.message == "attempt 2"


async def test_a_record_pushed_by_another_client_is_consumed(redis_server: RedisServer):
    import coredis

    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend:
        client = coredis.Redis.from_url(redis_server.url)
        async with client:
            # JSON, bytes that are not, and bytes that start like a job reference
            await client.lpush(name, ['{"page": "/a"}', b"\xff not json", b"\x00msgpack"])
        seen: list[trioqueue.Job] = []

        async def handler(job: trioqueue.Job) -> None:
            seen.append(job)

        async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.2):
            pass
        assert [job.payload for job in seen] == [{"page": "/a"}]
        dead = await backend.dead_letters()
        assert [d.payload for d in dead] == [b"\xff not json", b"\x00msgpack"]
        assert all((d.reason or "").startswith("undecodable record: not JSON") for d in dead)


@pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "simple"])
async def test_each_push_of_another_program_is_a_job_of_its_own(
    redis_server: RedisServer, reliable: bool
):
    """Seed 001 pushes `warm /home` twice: it runs twice, as a plain list runs it."""
    import coredis

    name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, min_idle=30, reliable=reliable
    ) as backend:
        # a producer's id in the raw ids' form: a push never takes it over
        await Queue(backend).enqueue({"mine": True}, id="raw-1")
        async with coredis.Redis.from_url(redis_server.url) as client:
            await client.lpush(name, ['{"page": "/home"}', '{"page": "/home"}'])
        seen: list[trioqueue.Job] = []

        async def handler(job: trioqueue.Job) -> None:
            seen.append(job)

        async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.2):
            pass
        stats = await backend.stats()
    by_id = {job.id: job.payload for job in seen}
    assert by_id.pop("raw-1") == {"mine": True}
    assert list(by_id.values()) == [{"page": "/home"}, {"page": "/home"}]
    raw_ids = list(by_id)
    assert len(set(raw_ids)) == 2
    assert all(job_id.startswith("raw-") and job_id != "raw-1" for job_id in raw_ids)
    assert (stats.enqueued, stats.succeeded, stats.deduplicated) == (3, 3, 0)
    assert stats.conserved


def test_a_simple_queue_needs_no_min_idle():
    backend = trioqueue.RedisBackend("redis://127.0.0.1:1/0", queue="{q}", reliable=False)
    assert not backend.reliable
    assert backend.default_lease == 30
    assert "simple" in repr(backend)


@pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "simple"])
async def test_blmove_waits_for_a_job_and_claims_it(redis_server: RedisServer, reliable: bool):
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=30, reliable=reliable
    ) as backend:
        claims: list[trioqueue.Claim] = []

        async def claimer() -> None:
            claims.extend(await backend.claim(4, lease=30, block=5))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(claimer)
            # every task quiet for 100 ms: the claimer is blocked in BLMOVE on the empty list
            await trio.testing.wait_all_tasks_blocked(cushion=0.1)
            await Queue(backend).enqueue({"late": True}, id="late")
        assert [c.job.id for c in claims] == ["late"]
        assert (await backend.stats()).gauges.inflight == 1
        assert await backend.pending() == 1
        client = coredis.Redis.from_url(redis_server.url)
        async with client:
            # the landing left the processing list once the claim was registered; the
            # claims set holds the lease in both modes
            assert await client.llen(backend.keys.processing) == 0
            assert await client.zcard(backend.keys.claims) == 1
            assert await client.llen(backend.keys.ready) == 0


async def test_a_simple_queue_is_fifo_and_each_job_goes_to_one_consumer(
    redis_server: RedisServer,
):
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=30, reliable=False
    ) as backend:
        for n in range(20):
            await Queue(backend).enqueue(n, id=f"j{n}")
        taken: list[list[object]] = [[], [], []]

        async def consumer(mine: list[object]) -> None:
            while claims := await backend.claim(2, lease=30, block=0):
                for claim in claims:
                    mine.append(claim.job.payload)
                    assert await backend.ack(claim)

        async with trio.open_nursery() as nursery:
            for mine in taken:
                nursery.start_soon(consumer, mine)
        every = [n for mine in taken for n in mine]
        assert sorted(every) == list(range(20))  # each exactly once
        assert all(mine == sorted(mine) for mine in taken)  # in the order they went in
        assert (await backend.stats()).succeeded == 20


async def test_an_entry_stranded_in_processing_without_a_claim_is_recovered(
    redis_server: RedisServer,
):
    """A crash between BLMOVE and registering the claim must not strand the job."""
    import coredis

    clock = {"now": 1000.0}
    name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, min_idle=5, clock=lambda: clock["now"]
    ) as backend:
        await Queue(backend).enqueue("p", id="j")
        client = coredis.Redis.from_url(redis_server.url)
        async with client:  # what a worker's BLMOVE did before it died
            await client.lmove(name, backend.keys.processing, "RIGHT", "LEFT")
        assert (await backend.sweep()).recovered == 0  # stamped now, recovered after min_idle
        await pass_time(backend, clock, 6)
        assert (await backend.sweep()).recovered == 1
        [claim] = await backend.claim(1, lease=5, block=0)
        assert claim.job.id == "j"


async def test_a_payload_lua_accepts_but_python_does_not_is_dead_lettered(
    redis_server: RedisServer,
):
    import coredis

    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend:
        client = coredis.Redis.from_url(redis_server.url)
        async with client:
            await client.lpush(name, ["0x10"])  # cjson reads a number; Python's json does not
        await Queue(backend).enqueue({"good": 1}, id="good")
        seen: list[object] = []

        async def handler(job: trioqueue.Job) -> None:
            seen.append(job.payload)

        with trio.fail_after(10):  # the pool must not crash or stall on it
            async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.2):
                pass
        assert seen == [{"good": 1}]
        [dead] = await backend.dead_letters()
        assert dead.reason is not None
        assert dead.reason.startswith("undecodable record: not JSON")


async def test_an_outcome_sent_twice_counts_once(redis_server: RedisServer):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        await Queue(backend).enqueue("p", id="j")
        [claim] = await backend.claim(1, lease=30, block=0)
        error = trioqueue.ErrorInfo(type="RuntimeError", message="boom")
        assert await backend.retry_later(claim, error)
        assert await backend.retry_later(claim, error)  # a replay after a lost reply
        record = await backend.status("j")
        assert record is not None
        assert (record.state, record.attempts) == (JobState.FAILED_RETRY, 1)
        stats = await backend.stats()
        assert (stats.retries, stats.failed, stats.processed) == (1, 1, 1)


@pytest.mark.parametrize("kind", ["ack", "dead", "drop"])
async def test_a_final_outcome_sent_again_after_a_lost_reply_is_resent_not_stale(
    redis_server: RedisServer, kind: str
):
    # what a pool does when Redis restarted between running its settle and replying
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        await Queue(backend).enqueue("p", id="j")
        [claim] = await backend.claim(1, lease=30, block=0)
        error = trioqueue.ErrorInfo(type="RuntimeError", message="boom")

        async def send() -> bool:
            if kind == "ack":
                return await backend.ack(claim)
            if kind == "dead":
                return await backend.dead_letter(claim, error, reason="boom")
            return await backend.drop(claim, reason="dropped")

        assert await send()
        assert await send()  # the same outcome again: it was recorded, nothing changes
        stats = await backend.stats()
    assert (stats.stale, stats.resent, stats.processed) == (0, 1, 1)


async def test_an_outcome_after_the_lease_ran_out_and_another_run_finished_is_stale(
    redis_server: RedisServer,
):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        await Queue(backend).enqueue("p", id="j")
        [first] = await backend.claim(1, lease=0.05, block=0)
        await trio.sleep(0.2)
        await backend.sweep()  # the lease ran out: put back
        [second] = await backend.claim(1, lease=30, block=0)
        assert await backend.ack(second)
        assert not await backend.ack(first)  # not this claim's outcome: stale
        stats = await backend.stats()
    assert (stats.stale, stats.resent, stats.succeeded) == (1, 0, 1)


async def test_retention_never_deletes_a_live_job_that_reused_an_expired_id(
    redis_server: RedisServer,
):
    import coredis

    clock = {"now": 1000.0}
    retention = trioqueue.Retention(max_count=None, max_age=60)
    async with trioqueue.RedisBackend(
        redis_server.url,
        queue=queue_name(),
        min_idle=30,
        retention=retention,
        clock=lambda: clock["now"],
    ) as backend:
        queue = Queue(backend)
        await queue.enqueue({"x": 1}, id="job1")
        [claim] = await backend.claim(1, lease=30, block=0)
        assert await backend.ack(claim)
        client = coredis.Redis.from_url(redis_server.url)
        async with client:  # what the record's TTL does after max_age
            await client.delete([backend.keys.job_prefix + "job1"])
        receipt = await queue.enqueue({"x": 1}, id="job1")  # accepted anew
        assert not receipt.deduplicated
        await pass_time(backend, clock, 61)
        assert (await backend.sweep()).evicted == 0
        [again] = await backend.claim(1, lease=30, block=0)
        assert again.job.id == "job1"
        assert await backend.ack(again)


async def test_a_late_blmove_registration_leaves_the_new_owners_claim_alone(
    redis_server: RedisServer,
):
    """A BLMOVE'd element recovered and claimed by another worker before its
    registration runs stays the other worker's."""
    import coredis

    clock = {"now": 1000.0}
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=5, clock=lambda: clock["now"]
    ) as backend:
        await Queue(backend).enqueue("p", id="J")
        keys = backend.keys
        client = coredis.Redis.from_url(redis_server.url)
        async with client:  # worker A's BLMOVE, whose claim script is slow to follow
            element = await client.lmove(keys.ready, keys.processing, "RIGHT", "LEFT")
        await backend.sweep()  # stamps it
        await pass_time(backend, clock, 6)
        await backend.sweep()  # recovers it
        [owner] = await backend.claim(1, lease=5, block=0)  # worker B
        late, _ = await backend._run("claim", 1, 5, "", "", element)  # A registers, at last
        assert late == []
        stats = await backend.stats()
        assert (stats.gauges.inflight, await backend.pending()) == (1, 1)
        assert await backend.ack(owner)


@contextlib.asynccontextmanager
async def ttl_queue(
    server: RedisServer, key_ttl: float, **options: Any
) -> AsyncIterator[tuple[trioqueue.RedisBackend, coredis.Redis[bytes]]]:
    """A new queue with *key_ttl* (and *options*), and a client to look at its keys."""
    async with (
        trioqueue.RedisBackend(
            server.url, queue=queue_name(), min_idle=30, key_ttl=key_ttl, **options
        ) as backend,
        coredis.Redis.from_url(server.url) as client,
    ):
        yield backend, client


async def wait_until_gone(client: coredis.Redis[bytes], key: str) -> None:
    """Poll until Redis has expired *key* (the server's own timer; bounded)."""
    with trio.fail_after(10):
        while await client.exists([key]):  # noqa: ASYNC110 - the server holds the timer
            await trio.sleep(0.05)


async def test_without_key_ttl_nothing_expires(redis_server: RedisServer):
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        await Queue(backend).enqueue({"n": 1}, id="j")
        async with coredis.Redis.from_url(redis_server.url) as client:
            assert await client.pttl(backend.keys.ready) == -1
            assert await client.pttl(backend.keys.job_prefix + "j") == -1


async def test_each_enqueue_keeps_a_queue_with_key_ttl_alive(redis_server: RedisServer):
    async with ttl_queue(redis_server, 60) as (backend, client):
        await Queue(backend).enqueue({"n": 1})
        await client.pexpire(backend.keys.ready, 5_000)  # as if 55 s had passed
        await Queue(backend).enqueue({"n": 2})
        assert 59_000 < await client.pttl(backend.keys.ready) <= 60_000


async def test_an_unfed_queue_expires_with_its_jobs(redis_server: RedisServer):
    async with ttl_queue(redis_server, 0.3) as (backend, client):
        queue = Queue(backend)
        for n in range(3):
            await queue.enqueue({"n": n}, id=f"j{n}")
        await wait_until_gone(client, backend.keys.ready)
        await wait_until_gone(client, backend.keys.job_prefix + "j0")
        assert await queue.status("j0") is None
        assert await backend.claim(3, lease=30, block=0) == []
        receipt = await queue.enqueue({"other": True}, id="j0")  # the id is free again
        assert not receipt.deduplicated


async def test_a_queue_fed_in_time_keeps_every_waiting_job(redis_server: RedisServer):
    """Seed 001: a queue that is used never expires, and nothing in it does (real time)."""
    async with ttl_queue(redis_server, 0.4, capacity=4) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue("later", id="later", delay=0.2)
        for n in range(12):  # 1.8 s in all: over four key TTLs, fed every 0.15 s
            await queue.submit({"n": n}, id=f"j{n}")  # past 4, stored unqueued
            await trio.sleep(0.15)
        for n in range(12):
            assert await client.exists([backend.keys.job_prefix + f"j{n}"]) == 1, n
        claimed: list[str] = []
        while batch := await backend.claim(5, lease=30, block=0):
            claimed += [claim.job.id for claim in batch]
            for claim in batch:
                assert await backend.ack(claim)
            await backend.sweep()  # the stored ones go on as room frees
        assert sorted(claimed) == sorted([f"j{n}" for n in range(12)] + ["later"])
        stats = await backend.stats()
        assert (stats.expired, stats.succeeded) == (0, 13)
        assert stats.conserved


async def test_a_job_of_an_expired_queue_is_not_found_as_a_duplicate(redis_server: RedisServer):
    """Its record may outlive the queue by up to a key TTL; its id starts a new job."""
    async with ttl_queue(redis_server, 0.3) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue({"n": 1}, id="j")
        await queue.enqueue({"n": 2}, id="k")
        await wait_until_gone(client, backend.keys.ready)  # the queue expired, unfed
        assert await client.pttl(backend.keys.job_prefix + "j") > 0  # the record lingers
        for job_id in ("j", "k"):  # one call each: the queue is born again at the first
            assert not (await queue.enqueue({"n": 1}, id=job_id)).deduplicated
        claims = await backend.claim(5, lease=30, block=0)
        assert sorted(claim.job.id for claim in claims) == ["j", "k"]
        for claim in claims:
            assert await backend.ack(claim)
        stats = await backend.stats()
        assert (stats.enqueued, stats.expired, stats.succeeded) == (4, 2, 2)
        assert stats.conserved


async def test_in_a_live_queue_a_waiting_job_is_found_by_its_id_as_ever(
    redis_server: RedisServer,
):
    """A record the expiry set does not list (a queue from before it) is no ghost."""
    async with ttl_queue(redis_server, 60) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue({"n": 1}, id="j")
        await client.zrem(backend.keys.expiry, ["j"])
        assert (await queue.enqueue({"n": 1}, id="j")).deduplicated
        with pytest.raises(trioqueue.IdempotencyConflict):
            await queue.enqueue({"n": 2}, id="j")


async def test_a_burst_of_more_than_a_thousand_jobs_all_outlive_their_fed_queue(
    redis_server: RedisServer,
):
    async with ttl_queue(redis_server, 1.0, capacity=10) as (backend, client):
        queue = Queue(backend)
        await queue.submit_many(["x"] * 1500, ids=[f"j{n}" for n in range(1500)])
        for n in range(3):  # fed every 0.8 s: the queue lives on, and so must every job
            await trio.sleep(0.8)
            await queue.submit("feed", id=f"feed-{n}")  # the queue is full: stored
        records = [backend.keys.job_prefix + f"j{n}" for n in range(1500)]
        assert await client.exists(records) == 1500


async def test_a_delayed_job_of_an_unfed_queue_is_found_by_its_id_until_due(
    redis_server: RedisServer,
):
    """The queue's lists expired; its delayed job lives until due, and is no ghost."""
    async with ttl_queue(redis_server, 0.3) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue("later", id="d", delay=30)
        await queue.enqueue("now", id="x")
        await wait_until_gone(client, backend.keys.ready)
        assert (await queue.enqueue("later", id="d")).deduplicated
        assert (await backend.stats()).expired == 0


async def test_a_poison_job_dead_lettered_at_its_claim_never_expires(redis_server: RedisServer):
    async with ttl_queue(redis_server, 0.3, max_deliveries=1) as (backend, client):
        await Queue(backend).enqueue("p", id="poison")
        await backend.claim(1, lease=0.05, block=0)  # its worker "dies"
        await trio.sleep(0.1)
        await backend.sweep()  # recovered, delivered once without an outcome
        assert await backend.claim(1, lease=30, block=0) == []  # dead-lettered instead
        await trio.sleep(0.8)  # past two key TTLs, nothing feeding the queue
        assert await client.pttl(backend.keys.job_prefix + "poison") == -1
        assert [dead.id for dead in await backend.dead_letters()] == ["poison"]


async def test_claimed_jobs_and_dead_letters_never_expire(redis_server: RedisServer):
    async with ttl_queue(redis_server, 0.3) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue({"n": 1}, id="running")
        await queue.enqueue({"n": 2}, id="doomed")
        running, doomed = await backend.claim(2, lease=30, block=0)
        assert await backend.dead_letter(doomed, None, "no")
        await wait_until_gone(client, backend.keys.ready)
        await trio.sleep(0.4)  # longer than key_ttl: nothing claimed may expire meanwhile
        assert await client.pttl(backend.keys.job_prefix + "running") == -1
        assert await client.pttl(backend.keys.job_prefix + "doomed") == -1
        assert await backend.ack(running)
        assert [dead.id for dead in await backend.dead_letters()] == ["doomed"]


async def test_a_follower_and_a_unique_key_live_as_long_as_their_claimed_job(
    redis_server: RedisServer,
):
    """With a key TTL, what waits on a claimed job (which never expires) does not expire."""
    async with ttl_queue(redis_server, 0.3) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue({"n": 1}, id="parent", unique_key="k")
        await queue.enqueue({"n": 2}, id="follower", after=["parent"])
        [claim] = await backend.claim(1, lease=30, block=0)
        await wait_until_gone(client, backend.keys.ready)
        await trio.sleep(0.7)  # past two key TTLs, nothing feeding the queue
        assert await client.pttl(backend.keys.job_prefix + "follower") == -1
        held = await queue.enqueue({"n": 3}, id="other", unique_key="k")
        assert (held.id, held.deduplicated) == ("parent", True)
        assert await backend.ack(claim)
        record = await queue.status("follower")
        assert record is not None
        assert record.state is trioqueue.JobState.RECEIVED  # released, and keyed again
        assert await client.pttl(backend.keys.job_prefix + "follower") > 0
        stats = await backend.stats()
        assert stats.conserved


async def test_a_job_that_waited_past_key_ttl_is_forgotten_and_counted(
    redis_server: RedisServer,
):
    async with ttl_queue(redis_server, 60) as (backend, client):
        queue = Queue(backend)
        await queue.enqueue({"n": 1}, id="old")
        await client.pexpire(backend.keys.job_prefix + "old", 1)  # as if 60 s had passed
        await wait_until_gone(client, backend.keys.job_prefix + "old")
        await queue.enqueue({"n": 2}, id="new")  # the queue itself is still fed
        [claim] = await backend.claim(5, lease=30, block=0)
        assert claim.job.id == "new"
        assert await backend.ack(claim)
        stats = await backend.stats()
        assert (stats.enqueued, stats.succeeded, stats.expired) == (2, 1, 1)
        assert stats.conserved


async def test_a_stored_job_that_waited_past_key_ttl_is_forgotten_too(redis_server: RedisServer):
    async with ttl_queue(redis_server, 60, capacity=1) as (backend, client):
        queue = Queue(backend)
        await queue.submit({"n": 1}, id="first")
        assert not (await queue.submit({"n": 2}, id="stored")).queued  # no room: stored
        await client.pexpire(backend.keys.job_prefix + "stored", 1)
        await wait_until_gone(client, backend.keys.job_prefix + "stored")
        [claim] = await backend.claim(1, lease=30, block=0)
        assert await backend.ack(claim)
        await backend.sweep()
        assert await backend.claim(1, lease=30, block=0) == []
        stats = await backend.stats()
        assert (stats.succeeded, stats.expired, stats.gauges.held) == (1, 1, 0)
        assert stats.conserved


async def test_inspect_shows_what_the_queue_holds(redis_server: RedisServer):
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), capacity=2, min_idle=30
    ) as backend:
        queue = Queue(backend)
        empty = await backend.inspect()
        assert (empty.ready, empty.claims, empty.oldest_claim_age) == (0, 0, None)
        for n in range(4):
            await queue.submit(n, id=f"j{n}")
        first, second = await backend.claim(2, lease=30, block=0)
        assert await backend.ack(first)
        assert await backend.dead_letter(second, None, "no")
        await backend.sweep()  # schedules the stored jobs into the free room
        [held] = await backend.claim(1, lease=30, block=0)
        info = await backend.inspect()
        assert (info.ready, info.stored, info.processing, info.claims) == (1, 0, 0, 1)
        assert info.oldest_claim_age is not None
        assert 0 <= info.oldest_claim_age < 5
        assert (info.dead, info.finished_kept) == (1, 1)
        assert await backend.ack(held)


@pytest.mark.parametrize(
    ("late_outcomes", "said", "not_said"),
    [
        (False, "may be killing the worker", "lease ran out"),
        (True, "3 of its runs finished after their lease ran out", "killing the worker"),
    ],
    ids=["workers-die", "runs-outlive-their-lease"],
)
async def test_a_job_delivered_max_deliveries_times_without_an_outcome_is_dead_lettered(
    redis_server: RedisServer, late_outcomes: bool, said: str, not_said: str
):
    """The reason tells a job whose workers die from one whose runs end too late."""
    clock = {"now": 1000.0}
    async with trioqueue.RedisBackend(
        redis_server.url,
        queue=queue_name(),
        min_idle=5,
        max_deliveries=3,
        clock=lambda: clock["now"],
    ) as backend:
        queue = Queue(backend)
        await queue.enqueue("poison", id="P")
        for _ in range(3):  # each run's lease runs out: its worker died, or blocked
            [claim] = await backend.claim(1, lease=5, block=0)
            await pass_time(backend, clock, 6)
            assert (await backend.sweep()).recovered == 1
            if late_outcomes:  # a blocked event loop: the run finishes, too late
                assert not await backend.ack(claim)
        assert await backend.claim(1, lease=5, block=0) == []  # the fourth is refused
        [dead] = await backend.dead_letters()
        assert dead.id == "P"
        reason = dead.reason or ""
        assert "delivered 3 times (max_deliveries)" in reason
        assert said in reason
        assert not_said not in reason
        if late_outcomes:
            assert "trio.to_thread.run_sync" in reason
        stats = await backend.stats()
        assert (stats.dead_lettered, stats.gauges.held) == (1, 0)
        assert stats.conserved
        # requeued by hand, it has its deliveries back
        await queue.requeue_dead("P")
        [claim] = await backend.claim(1, lease=5, block=0)
        assert await backend.ack(claim)


async def test_attempts_that_failed_with_an_outcome_never_reach_max_deliveries(
    redis_server: RedisServer,
):
    """Issue 35: a job's own 25 attempts ran out the 20 deliveries, blaming its handler."""
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=30, max_deliveries=3
    ) as backend:
        await Queue(backend).enqueue("p", id="J", max_attempts=6)
        for _ in range(5):  # five failed attempts, each recorded: none is a lost delivery
            [claim] = await backend.claim(1, lease=30, block=0)
            assert await backend.retry_later(claim, None)
            assert await backend.requeue(claim)
        [claim] = await backend.claim(1, lease=30, block=0)  # the sixth claim runs
        assert claim.job.attempt == 6
        assert await backend.dead_letter(claim, None, "attempts exhausted (6)")
        [dead] = await backend.dead_letters()
    assert dead.reason == "attempts exhausted (6)"


async def test_jobs_a_clean_shutdown_gave_back_are_not_counted_as_deliveries(
    redis_server: RedisServer,
):
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=30, max_deliveries=2
    ) as backend:
        await Queue(backend).enqueue("p", id="J")
        for _ in range(5):
            claims = await backend.claim(1, lease=30, block=0)
            assert len(claims) == 1
            assert await backend.release(claims) == 1
        [claim] = await backend.claim(1, lease=30, block=0)
        assert await backend.retry_later(claim, None)  # an attempt: a delivery
        assert await backend.requeue(claim)
        [claim] = await backend.claim(1, lease=30, block=0)  # the second delivery
        assert await backend.ack(claim)
        assert await backend.dead_letters() == []


async def test_a_simple_queue_never_gives_back_a_job_whose_outcome_was_lost(
    redis_server: RedisServer,
):
    """The ack cannot land within io_timeout (Redis unreachable): the job is not rerun."""
    async with trioqueue.RedisBackend(
        redis_server.url,
        queue=queue_name(),
        reliable=False,
        min_idle=1,
    ) as backend:
        await Queue(backend).enqueue({"charge": 100}, id="pay-1")
        runs: list[str] = []

        async def unreachable(claim: trioqueue.Claim) -> bool:
            raise trioqueue.BackendUnavailable(redis_server.url, "connection refused")

        backend.ack = unreachable  # type: ignore[method-assign]

        async def handler(job: trioqueue.Job) -> None:
            runs.append(job.id)

        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(
                backend, handler, io_timeout=0.5, sweep_interval=0.2, lease=1
            ):
                pass  # drains once the sweeper has dead-lettered it
        assert runs == ["pay-1"]
        [dead] = await backend.dead_letters()
        assert dead.id == "pay-1"
        assert (await backend.stats()).conserved


async def test_counters_outlive_key_ttl_while_jobs_are_held(redis_server: RedisServer):
    async with ttl_queue(redis_server, 0.3) as (backend, client):
        await Queue(backend).enqueue({"n": 1}, id="held")
        [claim] = await backend.claim(1, lease=30, block=0)
        await wait_until_gone(client, backend.keys.ready)
        assert await client.pttl(backend.keys.stats) == -1
        assert await backend.ack(claim)
        stats = await backend.stats()
        assert (stats.enqueued, stats.succeeded) == (1, 1)
        assert stats.conserved
        assert 0 < await client.pttl(backend.keys.finished) <= 300  # goes with its records


async def test_an_expired_reference_stamped_by_the_sweeper_counts_once(redis_server: RedisServer):
    clock = {"now": 1000.0}
    async with (
        trioqueue.RedisBackend(
            redis_server.url, queue=queue_name(), min_idle=5, key_ttl=60, clock=lambda: clock["now"]
        ) as backend,
        coredis.Redis.from_url(redis_server.url) as client,
    ):
        keys = backend.keys
        await Queue(backend).enqueue("p", id="J")
        await Queue(backend).enqueue("q", id="K")  # keeps the lists alive
        element = await client.lmove(keys.ready, keys.processing, "RIGHT", "LEFT")  # a BLMOVE
        await backend.sweep()  # stamps it
        await client.pexpire(keys.job_prefix + "J", 1)
        await wait_until_gone(client, keys.job_prefix + "J")
        rows, _ = await backend._run("claim", 0, 5, "", "", element)
        assert rows == []  # expired: counted
        await pass_time(backend, clock, 10)
        await backend.sweep()
        stats = await backend.stats()
        assert (stats.expired, stats.enqueued, stats.gauges.held) == (1, 2, 1)
        assert stats.conserved


async def test_reading_a_queue_needs_no_agreement_and_sees_its_true_mode(
    redis_server: RedisServer,
):
    name = queue_name()
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=name, reliable=False, capacity=5) as one,
        trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as reader,
    ):
        await Queue(one).enqueue("x", id="x")
        await one.claim(1, lease=30, block=0)
        stats = await reader.stats()  # a reliable reader of a simple queue
        assert (stats.gauges.inflight, stats.enqueued) == (1, 1)
        assert (await reader.inspect()).claims == 1


async def test_a_job_twice_held_by_dying_workers_runs_alone(redis_server: RedisServer):
    clock = {"now": 1000.0}
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=5, clock=lambda: clock["now"]
    ) as backend:
        queue = Queue(backend)
        for name in ("poison", "neighbour", "later"):
            await queue.enqueue(name, id=name)
        for _ in range(2):  # a worker claims both, dies; the sweeper recovers them
            claims = await backend.claim(2, lease=5, block=0)
            assert sorted(c.job.id for c in claims) in (
                ["neighbour", "poison"],
                ["later", "neighbour"],
                ["later", "poison"],
            )
            assert not any(c.suspect for c in claims)
            await pass_time(backend, clock, 6)
            await backend.sweep()
        info = await backend.inspect()
        assert info.stored >= 1  # the twice-delivered ones wait among the suspects
        assert await backend.pending() == 3
        [suspect] = await backend.claim(5, lease=5, block=0)
        assert suspect.suspect  # first, and alone
        assert await backend.ack(suspect)
        while claims := await backend.claim(5, lease=5, block=0):
            for claim in claims:
                assert await backend.ack(claim)
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held) == (3, 0)
        assert stats.conserved


async def test_a_suspect_over_its_keys_limit_stays_a_suspect_and_others_go_ahead(
    redis_server: RedisServer,
):
    clock = {"now": 1000.0}
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=5, clock=lambda: clock["now"]
    ) as backend:
        queue = Queue(backend)
        await queue.set_rate_limits(per_key=trioqueue.RateLimit(1, per=10.0))
        await queue.enqueue("p", id="poison", rate_key="a")
        for wait in (11, 6):  # claimed at 1000 and 1011 (its key allows), its worker dies
            [claim] = await backend.claim(1, lease=5, block=0)
            assert (claim.job.id, claim.suspect) == ("poison", False)
            await pass_time(backend, clock, wait)
            await backend.sweep()
        await queue.enqueue("n", id="neighbour")
        # at 1017 its key allows no start before 1021: it stays first among the
        # suspects, not a scheduled job claimed with others later; the others go ahead
        [other] = await backend.claim(5, lease=5, block=0)
        assert other.job.id == "neighbour"
        assert await backend.ack(other)
        await pass_time(backend, clock, 5)
        [suspect] = await backend.claim(5, lease=5, block=0)
        assert (suspect.job.id, suspect.suspect) == ("poison", True)
        assert await backend.ack(suspect)
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held) == (2, 0)
        assert stats.conserved


async def test_a_key_with_a_century_of_promised_starts_is_kept_not_an_error(
    redis_server: RedisServer,
):
    """Many jobs waiting under a long window are given turns further off than SET PX
    takes (2^63 ms): the key's times and its line are kept for at most 2^50 ms instead."""
    yearly = trioqueue.RateLimit(1, per=366 * 86_400.0)
    async with trioqueue.RedisBackend(
        redis_server.url, queue=queue_name(), min_idle=5, clock=lambda: 1000.0
    ) as backend:
        queue = Queue(backend)
        await queue.set_rate_limits(per_key=yearly)
        # as if 10^9 jobs of key k had started, one a year
        started = 1000 + 1e9 * yearly.per
        async with coredis.Redis.from_url(redis_server.url) as client:
            await client.set(backend._keys.rate_key("k"), f"{started!r} {yearly.stored()}")
        late = await queue.enqueue("late", rate_key="k")
        assert await backend.claim(1, lease=5, block=0) == []  # its turn is far off
        record = await queue.status(late.id)
        assert record is not None
        assert record.state is JobState.SCHEDULED
        async with coredis.Redis.from_url(redis_server.url) as client:
            kept = await client.pttl(backend._keys.rate_key("k"))
            line_kept = await client.pttl(backend._keys.rate_line("k"))
        assert 2**50 - 60_000 <= kept <= 2**50
        assert 2**50 - 60_000 <= line_kept <= 2**50


async def test_rate_limits_keep_whole_bursts_on_the_servers_own_clock(redis_server: RedisServer):
    # the server's TIME is seconds since the epoch, where floats are 2.4e-7 apart
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=5) as backend:
        queue = Queue(backend)
        await queue.set_rate_limits(
            queue=trioqueue.RateLimit(11, per=2.0, burst=2),
            per_key=trioqueue.RateLimit(11, per=2.0, burst=2),
        )
        await queue.enqueue_many(["a", "b", "c"], ids=["a", "b", "c"], rate_key="k")
        both = await backend.claim(3, lease=30, block=0)
        assert sorted(c.job.id for c in both) == ["a", "b"]  # the whole burst, at once
        # the next start is 2/11 s later: the claim waits for it within its block
        [third] = await backend.claim(3, lease=30, block=5)
        assert third.job.id == "c"
        for claim in [*both, third]:
            assert await backend.ack(claim)
        assert (await backend.stats()).conserved
