"""Redis at its limits: out of memory, hostile records, settings Redis cannot hold."""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import TYPE_CHECKING

import coredis
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trioqueue
from trioqueue import BackendOutOfMemory, BackendRefused, ConfigurationError, JobState, Queue
from trioqueue._record_json import record_json

from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import Iterator


def queue_name() -> str:
    return "{t-" + uuid.uuid4().hex[:12] + "}"


async def dead_letters(backend: trioqueue.Backend, *ids: str) -> None:
    """Make a dead letter of each of *ids*: one attempt each, and it fails."""

    async def fail(job: trioqueue.Job) -> None:
        raise RuntimeError("no")

    retry = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.open_worker_pool(backend, fail, retry=retry):
        for job_id in ids:
            await Queue(backend).enqueue(job_id, id=job_id)


@pytest.fixture
def full_server() -> Iterator[RedisServer]:
    """A private server with room for a few hundred small jobs and no eviction."""
    server = RedisServer(
        find_server_binary(), extra=("--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
    )
    server.start()
    yield server
    server.close()


async def test_a_full_redis_refuses_new_jobs_up_front_while_workers_drain_it(
    full_server: RedisServer,
):
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with trioqueue.RedisBackend(
        full_server.url, queue=queue_name(), capacity=100_000, min_idle=30
    ) as backend:
        queue = Queue(backend)
        accepted: list[str] = []

        async def fill() -> None:
            for n in range(2_000):  # 20 MB if Redis took them all
                await queue.submit("x" * 10_000, id=f"j{n}")
                accepted.append(f"j{n}")

        with pytest.raises(BackendOutOfMemory, match=r"out of memory \(maxmemory 3072 KiB\)"):
            await fill()
        assert 0 < len(accepted) < 300
        refused = f"j{len(accepted)}"
        assert await queue.status(refused) is None  # nothing half-written
        before = await backend.stats()
        assert (before.enqueued, before.gauges.held) == (len(accepted), len(accepted))

        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, workers=8):
                pass  # workers claim and complete on a full Redis
        after = await backend.stats()
    assert sorted(ran) == sorted(accepted)
    assert (after.succeeded, after.gauges.held, after.backend_errors) == (len(accepted), 0, 0)
    assert after.conserved


async def test_on_a_full_redis_an_ack_drops_the_result_with_the_reason_and_memory_holds(
    full_server: RedisServer,
):
    async def handler(job: trioqueue.Job) -> str:
        return "r" * 50_000  # 250 of them: 12 MB, four times the server's maxmemory

    async with (
        trioqueue.RedisBackend(
            full_server.url, queue=queue_name(), capacity=100_000, min_idle=30
        ) as backend,
    ):
        queue = Queue(backend)
        accepted: list[str] = []

        async def fill() -> None:
            for n in range(2_000):
                await queue.submit("x" * 10_000, id=f"j{n}")
                accepted.append(f"j{n}")

        with pytest.raises(BackendOutOfMemory):
            await fill()
        reply = await backend.command("CONFIG", "GET", "maxmemory")
        limit = int(reply[1])  # RESP2: a flat list of names and values
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, workers=8):
                pass
        info = (await backend.command("INFO", "memory")).decode()
        used = int(re.search(r"used_memory:(\d+)", info)[1])
        records = [await queue.status(job_id) for job_id in accepted]
        stats = await backend.stats()
    assert stats.succeeded == len(accepted)
    # not the 12 MB of results; the rest of the bookkeeping (states, counters, client
    # buffers) may still take a few hundred KB past the limit
    assert used < limit + 1024 * 1024, (used, limit)
    dropped = [r for r in records if r is not None and r.result is None]
    assert len(dropped) >= len(accepted) - 2  # at most one result fits, give or take
    for record in dropped:
        assert record.state is JobState.COMPLETED
        assert "Redis is out of memory" in (record.result_error or "")
        assert "maxmemory" in (record.result_error or "")


async def test_a_key_changed_by_hand_is_named_and_nothing_is_half_written(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        queue = Queue(backend)
        await queue.enqueue("first", id="first")
        await raw.delete([backend.keys.stats])
        await raw.set(backend.keys.stats, "x")
        with pytest.raises(
            BackendRefused, match=r"the key \{t-\w+\}\.stats holds a string, where this queue "
        ):
            await queue.enqueue("p", id="j")
        assert await raw.exists([backend.keys.job_prefix + "j"]) == 0  # nothing written
        assert await raw.llen(backend.keys.ready) == 1


@pytest.mark.parametrize(
    "name",
    # every key in CHECKED["add"]
    [
        *("ready", "processing", "unqueued", "finished", "stats", "sequence", "config"),
        *("scheduled", "level+2", "level+1", "level-1", "level-2"),
    ],
)
async def test_enqueue_refuses_each_key_it_uses_changed_by_hand_before_any_write(
    redis_server: RedisServer, name: str
):
    # the add script checks only the keys it uses (CHECKED): each of them is checked
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        key = (
            backend.keys.level(int(name[5:]))
            if name.startswith("level")
            else (getattr(backend.keys, name))
        )
        await Queue(backend).enqueue("first", id="first")  # the settings, read once
        await raw.delete([key])
        await raw.sadd(key, ["x"])  # a set: no key of the add script's is one
        with pytest.raises(BackendRefused, match=re.escape(f"the key {key} holds a set")):
            await Queue(backend).enqueue("p", id="j")
        assert await raw.exists([backend.keys.job_prefix + "j"]) == 0  # nothing written


async def test_enqueue_does_not_touch_the_keys_it_does_not_check(redis_server: RedisServer):
    # every kind of enqueue, with each key the add script leaves unchecked holding a
    # string: a script that touched one would fail with WRONGTYPE half-way
    async with (
        trioqueue.RedisBackend(
            redis_server.url, queue=queue_name(), capacity=3, min_idle=30
        ) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        keys = backend.keys
        unchecked = [keys.claims, keys.dead, keys.suspects, keys.held, keys.retrying, keys.events]
        queue = Queue(backend)
        await queue.enqueue("ready", id="a")  # the first adopts the settings: every key
        for key in unchecked:
            await raw.set(key, "x")
        await queue.enqueue("urgent", id="b", priority=2)
        await queue.enqueue("later", id="c", delay=60)
        await queue.enqueue("ready", id="a")  # a duplicate
        await queue.enqueue("ready", id="z")
        await queue.submit_many(["d", "e", "f"], ids=["d", "e", "f"])  # e, f: no room
        with pytest.raises(trioqueue.QueueFull):
            await queue.try_enqueue("g", id="g")
        for key in unchecked:
            assert await raw.get(key) == b"x"
        await raw.delete(unchecked)  # status() reads every key
        states = {i: (await queue.status(i)) for i in "abcdefgz"}
        assert {i: (r.state, r.queued) for i, r in states.items() if r} == {
            "a": (JobState.RECEIVED, True),
            "z": (JobState.RECEIVED, True),
            "b": (JobState.RECEIVED, True),
            "c": (JobState.SCHEDULED, False),
            "d": (JobState.RECEIVED, False),
            "e": (JobState.RECEIVED, False),
            "f": (JobState.RECEIVED, False),
        }


async def test_a_job_record_changed_by_hand_into_another_kind_is_a_refusal_naming_it(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        await Queue(backend).enqueue("p", id="j")
        await raw.delete([backend.keys.job_prefix + "j"])
        await raw.set(backend.keys.job_prefix + "j", "x")
        with pytest.raises(BackendRefused, match=r"refused HGETALL: .*the wrong kind of value"):
            await backend.status("j")


async def test_a_pool_whose_outcomes_are_refused_retries_them_and_does_not_crash(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        stats_key = backend.keys.stats
        ran = trio.Event()

        async def handler(job: trioqueue.Job) -> None:
            await raw.rename(stats_key, stats_key + ".kept")
            await raw.set(stats_key, "x")  # the ack that follows is refused
            ran.set()

        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, io_timeout=60) as pool:
                await Queue(backend).enqueue("p", id="j")
                await ran.wait()
                while pool.metrics.backend_errors < 2:  # noqa: ASYNC110 - retries with backoff
                    await trio.sleep(0.05)
                await raw.delete([stats_key])
                await raw.rename(stats_key + ".kept", stats_key)  # put back: the ack lands
        record = await backend.status("j")
        assert record is not None
        assert record.state is JobState.COMPLETED
        # the log names the first refused call: the ack, or the fetcher's next claim
        assert re.search(
            r"refused the (settle|claim) script: the key \S+\.stats holds", caplog.text
        )
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held) == (1, 0)
        assert stats.conserved


@pytest.mark.parametrize("levels", [101, 600, 950, 995])
async def test_a_record_nested_too_deep_becomes_a_dead_letter_that_every_view_shows(
    redis_server: RedisServer, levels: int
):
    # Redis's cjson takes all of them; Python decodes up to its stack's limit, but
    # anything recursing over it later would break (a view's JSON, a handler)
    deep = b"[" * levels + b"]" * levels
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        await raw.lpush(backend.keys.ready, [deep])  # another client's push
        await Queue(backend).enqueue("after", id="after")
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler):
                pass
        [dead] = await backend.dead_letters()
        record = await backend.status(dead.id)
        stats = await backend.stats()
    assert ran == ["after"]  # the pool went on with the next job
    assert dead.payload == deep  # listed, with its raw bytes
    assert "undecodable record: not JSON (" in (dead.reason or "")
    assert "nest" in (dead.reason or "")
    assert record == dead
    shown = json.loads(json.dumps(record_json(dead)))  # as dead list --json and HTTP show it
    assert (shown["payload"], shown["payload_raw"]) == (None, deep.decode())
    assert (stats.dead_lettered, stats.succeeded, stats.gauges.held) == (1, 1, 0)


async def test_dead_letters_list_even_when_a_record_was_changed_by_hand(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        await dead_letters(backend, "a", "b")
        key = backend.keys.job_prefix
        await raw.hdel(key + "a", ["p"])  # its payload field is gone
        await raw.hset(key + "b", {"s": "weird", "a": "many"})
        dead = {record.id: record for record in await backend.dead_letters()}
    assert dead["a"].payload is None
    assert dead["b"].state is JobState.FAILED
    assert "state 'weird', which trioqueue never writes" in (dead["b"].reason or "")
    assert dead["b"].attempts == 0


async def test_a_record_without_its_payload_is_dead_lettered_and_the_pool_goes_on(
    redis_server: RedisServer,
):
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        queue = Queue(backend)
        await queue.enqueue("lost", id="bare")
        await queue.enqueue("after", id="after")
        await raw.hdel(backend.keys.job_prefix + "bare", ["p"])  # its payload field is gone
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler):
                pass
        [dead] = await backend.dead_letters()
        stats = await backend.stats()
    assert ran == ["after"]
    assert dead.id == "bare"
    assert dead.reason == "undecodable record: no payload (its payload field is missing)"
    assert (stats.dead_lettered, stats.succeeded, stats.gauges.held) == (1, 1, 0)
    assert stats.conserved


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (b"{not json", "its options field is not JSON"),
        (b"[1, 2]", "its options field is not a JSON object"),
        (b'{"a": "many"}', "max_attempts 'many'"),
        (b'{"a": 0}', "max_attempts 0"),
        (b'{"t": -1}', "handler_timeout -1"),
        (b'{"t": "soon"}', "handler_timeout 'soon'"),
        (b'{"n": 5}', "task 5"),
    ],
)
async def test_a_record_with_options_changed_by_hand_is_dead_lettered_and_the_pool_goes_on(
    redis_server: RedisServer, options: bytes, said: str
):
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        queue = Queue(backend)
        await queue.enqueue("odd", id="odd", max_attempts=3)
        await queue.enqueue("after", id="after")
        await raw.hset(backend.keys.job_prefix + "odd", {"o": options})
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler):
                pass
        [dead] = await backend.dead_letters()
        stats = await backend.stats()
    assert ran == ["after"]
    assert dead.id == "odd"
    assert (dead.reason or "").startswith("undecodable record: ")
    assert said in (dead.reason or "")
    assert (stats.dead_lettered, stats.succeeded, stats.gauges.held) == (1, 1, 0)


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1.5", "many", "1e400"])
async def test_a_record_whose_attempts_were_changed_by_hand_is_dead_lettered_naming_them(
    redis_server: RedisServer, value: str
):
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        queue = Queue(backend)
        await queue.enqueue("odd", id="odd", max_attempts=3)
        await queue.enqueue("after", id="after")
        await raw.hset(backend.keys.job_prefix + "odd", {"a": value})
        with trio.fail_after(30):  # the drain ends: no settle call fails over and over
            async with trioqueue.open_worker_pool(backend, handler):
                pass
        [dead] = await backend.dead_letters()
        stats = await backend.stats()
    assert ran == ["after"]
    assert dead.id == "odd"
    assert dead.reason == (
        f"undecodable record: its attempts field is {value!r}, not a whole number of attempts"
    )
    assert (stats.dead_lettered, stats.succeeded, stats.gauges.held) == (1, 1, 0)
    assert stats.conserved


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400"])
async def test_a_record_with_numbers_out_of_range_still_reads(redis_server: RedisServer, value):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        await Queue(backend).enqueue("p", id="j")
        await raw.hset(backend.keys.job_prefix + "j", {"a": value, "c": value, "u": value})
        record = await backend.status("j")
    assert record is not None
    assert (record.attempts, record.created_at, record.updated_at) == (0, 0.0, 0.0)


CENTURY = 100 * 365 * 24 * 3600
seconds = st.sampled_from([0.001, CENTURY]) | st.floats(0.001, CENTURY) | st.integers(1, CENTURY)
counts = st.sampled_from([1, 10**30]) | st.integers(1, 10**30)


@st.composite
def accepted_settings(draw: st.DrawFn) -> dict[str, object]:
    """Settings at and inside every documented bound, edges included."""
    min_idle = draw(seconds)
    later = st.floats(min_idle, CENTURY, exclude_min=True) if min_idle < CENTURY else st.nothing()
    return {
        "min_idle": min_idle,
        "recovery_ttl": draw(st.none() | later),
        "key_ttl": draw(st.none() | seconds),
        "retention": trioqueue.Retention(
            max_count=draw(st.none() | st.just(0) | counts),
            max_age=draw(st.none() | st.just(0) | seconds),
        ),
        "capacity": draw(counts),
        "max_deliveries": draw(st.none() | counts),
    }


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=accepted_settings())
def test_every_accepted_setting_works_end_to_end_on_a_real_server(
    redis_server: RedisServer, options: dict[str, object]
):
    backend = trioqueue.RedisBackend(redis_server.url, queue=queue_name(), **options)  # type: ignore[arg-type]

    async def exercise() -> None:
        async with backend:
            queue = Queue(backend)
            for n in range(3):
                await queue.submit({"n": n}, id=f"j{n}")
            claims = await backend.claim(3, lease=backend.default_lease, block=0)
            await backend.renew(claims, lease=backend.default_lease)
            for claim, outcome in zip(claims, ("ack", "retry", "release"), strict=False):
                if outcome == "ack":
                    await backend.ack(claim)
                elif outcome == "retry":
                    await backend.retry_later(claim, None)
                    await backend.requeue(claim)
                else:
                    await backend.release([claim])
            await backend.sweep()
            await backend.dead_letters()
            stats = await backend.stats()
            if options["key_ttl"] is None:
                assert stats.conserved, stats
            else:  # a whole queue that expires takes its waiting jobs along, uncounted
                ended = stats.succeeded + stats.dead_lettered + stats.dropped + stats.expired
                assert ended + stats.gauges.held <= stats.enqueued, stats

    trio.run(exercise)


@pytest.mark.parametrize(
    "options",
    [
        {"min_idle": 0.0009},
        {"min_idle": CENTURY + 1},
        {"min_idle": math.inf},
        {"min_idle": math.nan},
        {"min_idle": 1e300},
        {"min_idle": 30, "key_ttl": 1e15},
        {"min_idle": 30, "recovery_ttl": CENTURY + 1},
        {"min_idle": 30, "retention": trioqueue.Retention(max_age=math.inf)},
        {"min_idle": 30, "retention": trioqueue.Retention(max_age=1e300)},
    ],
)
def test_settings_beyond_what_redis_holds_are_refused_before_anything_runs(options):
    with pytest.raises(ConfigurationError, match=r"RedisBackend\("):
        trioqueue.RedisBackend("redis://127.0.0.1:1/0", queue=queue_name(), **options)


async def test_a_dead_letter_whose_record_is_gone_is_reported_not_requeued(
    redis_server: RedisServer,
):
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend,
        coredis.Redis.from_url(redis_server.url) as raw,
    ):
        await dead_letters(backend, "gone")
        await raw.delete([backend.keys.job_prefix + "gone"])
        with pytest.raises(trioqueue.JobNotFound, match=r"record is gone .* purge_dead"):
            await backend.requeue_dead("gone")
        assert await raw.exists([backend.keys.job_prefix + "gone"]) == 0  # no empty record
        assert await backend.pending() == 0
        assert await backend.purge_dead("gone") == 1
