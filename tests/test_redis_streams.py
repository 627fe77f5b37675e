"""Stream sources: a Redis stream read through a consumer group, on a real server.

The contract suite runs on a stream source too (its ``redis-stream`` variant);
these tests cover what only a stream has: entries other programs add, the group's
pending list, several groups, where a new group starts, consumers that die, and
the seed's uploads → thumbnails chain.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import coredis
import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import ConfigurationError, Queue, reply_id

from .redis_time import pass_time
from .test_cli_redis import HERE, cli, cli_here
from .test_redis_crashes import start_and_kill_mid_handler

if TYPE_CHECKING:
    from .redis_server import RedisServer


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Jump only after 20 ms with every task blocked: a Redis reply may be on its way."""
    return trio.testing.MockClock(autojump_threshold=0.02)


def tagged(name: str) -> str:
    """A key with a hash tag of its own (one test run's streams never meet)."""
    return "{" + f"{name}-{uuid.uuid4().hex[:8]}" + "}"


def collect(into: list[trioqueue.Job]) -> trioqueue.Handler:
    async def handler(job: trioqueue.Job) -> None:
        into.append(job)

    return handler


async def pending_entries(raw: Any, stream: str, group: str) -> list[tuple[str, str, int]]:
    """The group's pending entries: (entry id, consumer, deliveries)."""
    rows = await raw.xpending(stream, group, "-", "+", 100)
    return [(text(row.identifier), text(row.consumer), row.delivered) for row in rows]


def text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def test_the_seeds_uploads_become_thumbnails(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    """Seed 001's third example: another program adds uploads to a stream; the group
    ``thumbnailer`` answers each with a job on the reliable ``{thumbnails}`` list."""
    url, clock = redis_server.url, trio.current_time
    uploads_key = tagged("uploads")
    rendered: list[tuple[str, str]] = []

    async def queue_thumbnail(job: trioqueue.Job) -> dict[str, str]:
        return {"image": job.payload["image"]}

    async def render(job: trioqueue.Job) -> None:
        rendered.append((job.id, job.payload["image"]))

    async with (
        coredis.Redis.from_url(url) as raw,
        trioqueue.RedisBackend(
            url, stream=uploads_key, group="thumbnailer", min_idle=60, clock=clock
        ) as uploads,
        trioqueue.RedisBackend(url, queue=tagged("thumbnails"), min_idle=60, clock=clock) as thumbs,
    ):
        async with (
            trioqueue.open_worker_pool(thumbs, render),
            trioqueue.open_worker_pool(uploads, queue_thumbnail, reply_to=Queue(thumbs)),
        ):
            # the group is made by the pool's first claim, from '$': entries from now on
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            entries = [
                (await raw.xadd(uploads_key, {"image": image})).decode()
                for image in ("cat.png", "dog.png")
            ]
        assert sorted(rendered) == sorted(
            (reply_id(entry), image)
            for entry, image in zip(entries, ("cat.png", "dog.png"), strict=True)
        )
        for entry in entries:  # the upload job's id is the entry's
            record = await uploads.status(entry)
            assert record is not None
            assert record.state is trioqueue.JobState.COMPLETED
            assert record.payload == {"image": "cat.png" if entry == entries[0] else "dog.png"}
        assert await pending_entries(raw, uploads_key, "thumbnailer") == []  # all acknowledged
        assert await raw.xlen(uploads_key) == 2  # kept: other groups may read them


async def test_each_added_entry_is_a_job_even_when_two_are_the_same(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream, seen = tagged("warm"), []
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url,
            stream=stream,
            group="g",
            start="0",
            clock=trio.current_time,
            min_idle=30,
        ) as backend,
    ):
        first = (await raw.xadd(stream, {"page": "/home"})).decode()
        second = (await raw.xadd(stream, {"page": "/home"})).decode()
        async with trioqueue.open_worker_pool(backend, collect(seen)):
            pass
        assert sorted((job.id, job.payload["page"]) for job in seen) == [
            (first, "/home"),
            (second, "/home"),
        ]


async def test_a_group_created_from_dollar_skips_what_was_there_and_from_zero_reads_it(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream = tagged("history")
    url, clock = redis_server.url, trio.current_time
    async with coredis.Redis.from_url(url) as raw:
        old = (await raw.xadd(stream, {"n": "old"})).decode()
        for start, expected in (("$", []), ("0", [old])):
            seen: list[trioqueue.Job] = []
            group = f"from-{start}"
            async with (
                trioqueue.RedisBackend(
                    url, stream=stream, group=group, start=start, clock=clock, min_idle=30
                ) as backend,
                trioqueue.open_worker_pool(backend, collect(seen)),
            ):
                pass
            assert [job.id for job in seen] == expected, start


async def test_an_enqueued_job_is_one_entry_that_every_group_runs_under_its_id(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream = tagged("events")
    url, clock = redis_server.url, trio.current_time
    runs: dict[str, list[trioqueue.Job]] = {"audit": [], "mail": []}
    async with (
        coredis.Redis.from_url(url) as raw,
        trioqueue.RedisBackend(url, stream=stream, group="mail", clock=clock, min_idle=30) as mail,
        trioqueue.RedisBackend(
            url, stream=stream, group="audit", start="0", clock=clock, min_idle=30
        ) as audit,
    ):
        receipt = await Queue(mail).enqueue({"to": "ada"}, id="signup-1")
        again = await Queue(mail).enqueue({"to": "ada"}, id="signup-1")
        assert (receipt.deduplicated, again.deduplicated) == (False, True)
        with pytest.raises(trioqueue.IdempotencyConflict):
            await Queue(mail).enqueue({"to": "bob"}, id="signup-1")
        [entry] = await raw.xrange(stream)
        assert set(entry.field_values) == {b"id", b"payload", b"hash"}
        for name, backend in (("mail", mail), ("audit", audit)):
            async with trioqueue.open_worker_pool(backend, collect(runs[name])):
                pass
        for jobs in runs.values():
            assert [(job.id, job.payload) for job in jobs] == [("signup-1", {"to": "ada"})]
        for group in ("mail", "audit"):
            assert await pending_entries(raw, stream, group) == []


async def test_delete_done_removes_each_entry_once_its_job_is_finished(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream = tagged("once")
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url,
            stream=stream,
            group="g",
            delete_done=True,
            clock=trio.current_time,
            min_idle=30,
        ) as backend,
    ):

        async def handler(job: trioqueue.Job) -> None:
            if job.payload == "bad":
                raise trioqueue.Drop("not wanted")
            assert await raw.xlen(stream) >= 1  # still there while it runs

        await Queue(backend).enqueue_many(["good", "bad"])
        async with trioqueue.open_worker_pool(backend, handler):
            pass
        assert await raw.xlen(stream) == 0
        stats = await backend.stats()
        assert (stats.succeeded, stats.dropped) == (1, 1)


async def test_a_running_job_is_pending_for_its_consumer_with_its_delivery_count(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream = tagged("count")
    seen: list[list[tuple[str, str, int]]] = []
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url,
            stream=stream,
            group="g",
            consumer="me",
            clock=trio.current_time,
            min_idle=30,
        ) as backend,
    ):

        async def handler(job: trioqueue.Job) -> None:
            seen.append(await pending_entries(raw, stream, "g"))
            if job.attempt < 3:
                raise ValueError("again")

        receipt = await Queue(backend).enqueue({"n": 1})
        async with trioqueue.open_worker_pool(
            backend, handler, retry=trioqueue.RetryPolicy(base_delay=0.1, max_delay=0.1)
        ):
            pass
        [entry] = await raw.xrange(stream)
        assert seen == [[(text(entry.identifier), "me", attempt)] for attempt in (1, 2, 3)]
        assert await pending_entries(raw, stream, "g") == []
        record = await backend.status(receipt.id)
        assert record is not None
        assert (record.state, record.attempts) == (trioqueue.JobState.COMPLETED, 3)


async def test_an_entry_another_consumer_left_pending_is_taken_over_after_min_idle(
    redis_server: RedisServer,
):
    """Real time: XAUTOCLAIM's idle time is the server's. Another program's consumer
    read an entry and died; a pool of the same group runs it once it is idle."""
    stream, min_idle = tagged("orphan"), 0.5
    seen: list[tuple[str, Any, list[tuple[str, str, int]]]] = []
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url, stream=stream, group="g", min_idle=min_idle, consumer="me"
        ) as b,
    ):

        async def handler(job: trioqueue.Job) -> None:
            seen.append((job.id, job.payload, await pending_entries(raw, stream, "g")))

        await raw.xgroup_create(stream, "g", "$", mkstream=True)
        entry = text(await raw.xadd(stream, {"image": "lost.png"}))
        await raw.xreadgroup("g", "rust-worker", {stream: ">"})
        read_at = trio.current_time()
        async with trioqueue.open_worker_pool(b, handler, sweep_interval=0.1):
            pass  # the pool waits for the entry: it is pending in the group
        # now this process's, and its second delivery (the dead consumer's counts)
        assert seen == [(entry, {"image": "lost.png"}, [(entry, "me", 2)])]
        assert trio.current_time() - read_at >= min_idle
        assert await pending_entries(raw, stream, "g") == []
        assert (await b.stats()).recovered == 1


async def test_a_killed_consumers_job_runs_again_within_min_idle_and_a_sweep(
    redis_server: RedisServer,
):
    stream, min_idle, sweep = tagged("crash"), 1.0, 0.2
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url, stream=stream, group="workers", min_idle=30
        ) as backend,
    ):
        await Queue(backend).enqueue({"n": 1}, id="victim")
        await Queue(backend).enqueue({"n": 2}, id="bystander")
        killed_at = await start_and_kill_mid_handler(redis_server.url, stream, min_idle, "stream")
        [(_, consumer, deliveries)] = await pending_entries(raw, stream, "workers")
        assert backend.stream is not None
        assert (consumer != backend.stream.consumer, deliveries) == (True, 1)  # the killed one's
        runs: dict[str, float] = {}

        async def handler(job: trioqueue.Job) -> None:
            runs[job.id] = trio.current_time() - killed_at

        async with trioqueue.open_worker_pool(
            backend, handler, sweep_interval=sweep, poll_interval=0.2
        ):
            pass
        assert sorted(runs) == ["bystander", "victim"]
        assert runs["victim"] <= min_idle + sweep + 1.0  # one second for the process to start
        assert await pending_entries(raw, stream, "workers") == []
        stats = await backend.stats()
        assert (stats.recovered, stats.succeeded, stats.gauges.held) == (1, 2, 0)
        assert stats.conserved


async def test_an_entry_delivered_max_deliveries_times_is_a_dead_letter_and_acknowledged(
    redis_server: RedisServer,
):
    """Each delivery is the group's too: the pending list counts them as trioqueue does."""
    stream, clock = tagged("poison"), {"now": 1000.0}
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url,
            stream=stream,
            group="g",
            consumer="me",
            min_idle=5,
            max_deliveries=3,
            clock=lambda: clock["now"],
        ) as backend,
    ):
        await Queue(backend).enqueue("poison", id="P")
        for delivery in (1, 2, 3):  # each run's worker dies: its lease runs out
            [claim] = await backend.claim(1, lease=5, block=0)
            [(_, consumer, deliveries)] = await pending_entries(raw, stream, "g")
            assert (claim.job.id, consumer, deliveries) == ("P", "me", delivery)
            await pass_time(backend, clock, 6)
            assert (await backend.sweep()).recovered == 1
        assert await backend.claim(1, lease=5, block=0) == []  # the fourth is refused
        [dead] = await backend.dead_letters()
        assert (dead.id, "delivered 3 times (max_deliveries)" in (dead.reason or "")) == (
            "P",
            True,
        )
        assert await pending_entries(raw, stream, "g") == []  # done with, for the group


async def test_an_entry_that_is_not_json_is_a_dead_letter_with_the_reason(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream, seen = tagged("bad"), []
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url,
            stream=stream,
            group="g",
            start="0",
            clock=trio.current_time,
            min_idle=30,
        ) as backend,
    ):
        # trioqueue's own field layout, with a payload that is not JSON
        await raw.xadd(stream, {"id": "x", "payload": "{nope", "hash": "h"})
        async with trioqueue.open_worker_pool(backend, collect(seen)):
            pass
        assert seen == []
        [dead] = await backend.dead_letters()
        assert dead.id == "x"
        assert "not JSON" in (dead.reason or "")
        assert await pending_entries(raw, stream, "g") == []  # acknowledged: it is done


async def test_an_entry_with_an_empty_id_runs_under_the_entrys_own_id(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream, seen = tagged("id"), []
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url,
            stream=stream,
            group="g",
            start="0",
            clock=trio.current_time,
            min_idle=30,
        ) as backend,
    ):
        # trioqueue's own field layout, with an id no job can have: another program's
        fields = {"id": "", "payload": '{"a":1}', "hash": "h"}
        entry = text(await raw.xadd(stream, fields))
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, collect(seen)):
                pass  # a draining pool finishes
        assert [(job.id, job.payload) for job in seen] == [(entry, fields)]
        assert await pending_entries(raw, stream, "g") == []  # acknowledged: it is done


async def test_a_queue_named_as_a_groups_keys_are_is_refused_whichever_came_first(
    redis_server: RedisServer,
):
    # a stream's group keeps its keys under "<stream>:<group>", the names of a plain
    # queue called that: the one that comes second is refused, and nothing is mixed
    for first in ("stream", "list"):
        stream = tagged("s")
        group = trioqueue.RedisBackend(redis_server.url, stream=stream, group="g", min_idle=30)
        plain = trioqueue.RedisBackend(redis_server.url, queue=f"{stream}:g", min_idle=30)
        ours, theirs = (group, plain) if first == "stream" else (plain, group)
        async with ours:
            await Queue(ours).enqueue("a", id="a")
        async with theirs:
            with pytest.raises(ConfigurationError, match=f"belong to a {first} source") as told:
                await Queue(theirs).enqueue("b", id="b")
            assert "give the queue or the group another name" in str(told.value)
        async with ours:
            assert await ours.status("a") is not None
            assert await ours.status("b") is None


async def test_a_group_deleted_by_hand_is_made_again_from_the_start(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    stream, seen = tagged("again"), []
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(
            redis_server.url, stream=stream, group="g", clock=trio.current_time, min_idle=30
        ) as backend,
    ):
        await Queue(backend).enqueue(1, id="one")
        await raw.xgroup_destroy(stream, "g")
        await Queue(backend).enqueue(2, id="two")
        async with trioqueue.open_worker_pool(backend, collect(seen)):
            pass
        assert sorted(job.id for job in seen) == ["one", "two"]  # nothing lost


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"stream": "s"}, "name the consumer group"),
        ({"stream": "s", "group": "g", "queue": "q"}, "give one of them"),
        ({}, "needs queue="),
        ({"stream": "s", "group": "g", "capacity": 10}, "no capacity"),
        ({"stream": "s", "group": "g", "reliable": False}, "always at-least-once"),
        ({"stream": "s", "group": "g", "key_ttl": 60}, "no key_ttl"),
        ({"stream": "s", "group": "g", "start": "now"}, "use '\\$'"),
        ({"queue": "q", "group": "g"}, "belongs to a stream source"),
        ({"stream": "s", "group": ""}, "name the group"),
        # its keys would be those of stream '{x}:b' with group 'c'
        ({"stream": "{x}", "group": "b:c"}, "stream '{x}:b' with group 'c' would share"),
    ],
)
def test_a_stream_source_refuses_what_it_cannot_be(options: dict[str, Any], match: str):
    with pytest.raises(ConfigurationError, match=match):
        trioqueue.RedisBackend("redis://localhost:1", **options)


async def test_configure_is_refused_for_a_stream(redis_server: RedisServer):
    async with trioqueue.RedisBackend(
        redis_server.url, stream="s", group="g", min_idle=30
    ) as backend:
        with pytest.raises(ConfigurationError, match="is a stream"):
            await backend.configure(capacity=5)
    assert backend.stream is not None
    assert (backend.stream.stream, backend.stream.group) == ("s", "g")
    assert "stream='s'" in repr(backend)


async def test_a_stream_takes_a_queue_rate_limit_but_no_rate_key(redis_server: RedisServer):
    async with trioqueue.RedisBackend(
        redis_server.url, stream=tagged("s"), group="g", min_idle=30
    ) as backend:
        queue = trioqueue.Queue(backend)
        with pytest.raises(ConfigurationError, match="carry no rate_key"):
            await queue.set_rate_limits(per_key=trioqueue.RateLimit(1))
        with pytest.raises(ValueError, match="nor limit starts per rate key"):
            await queue.enqueue("x", rate_key="customer-1")
        await queue.set_rate_limits(queue=trioqueue.RateLimit(3, per=2.0))
        assert await queue.rate_limits() == trioqueue.RateLimits(trioqueue.RateLimit(3, per=2.0))


def test_the_command_line_runs_a_stream_through_a_group(redis_server: RedisServer) -> None:
    # seed 001's uploads / thumbnailer, from the shell: a producer and a worker
    stream = "{up-" + uuid.uuid4().hex[:8] + "}"
    naming = ["--redis", redis_server.url, "--stream", stream, "--group", "thumbnailer"]
    lines = "".join(json.dumps({"image": f"{n}.png", "id": f"u{n}"}) + "\n" for n in range(3))
    added = cli("enqueue", "--id-key", "id", *naming, stdin=lines)
    assert added.returncode == 0, added.stderr
    worker = subprocess.Popen(
        [sys.executable, "-m", "trioqueue", "worker", "cli_handlers:record", *naming],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            shown = cli_here("stats", "--json", "--interval", "0.05", *naming)
            assert shown.returncode == 0, shown.stderr
            if json.loads(shown.stdout)["counters"]["succeeded"] == 3:
                break
            assert time.monotonic() < deadline, "the worker did not run the stream's jobs"
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert sorted(line for line in out.splitlines() if line.startswith("ran ")) == [
        "ran u0",
        "ran u1",
        "ran u2",
    ]
    assert f"{stream}:thumbnailer" in err  # the worker names what it reads


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--stream", "{s}"], "--stream needs --group too"),
        (["--group", "g"], "--group needs --stream too"),
        (["--stream", "{s}", "--group", "g", "--queue", "{q}"], "--queue with --stream"),
        (["--stream", "{s}", "--group", "g", "--shards", "2"], "--shards with --stream"),
        (["--stream", "{s}", "--group", "g", "--capacity", "5"], "--capacity with --stream"),
        (["--stream", "{s}", "--group", "g", "--simple"], "--simple with --stream"),
    ],
)
def test_a_stream_named_by_halves_or_beside_a_queue_is_a_usage_error(options, said):
    refused = cli_here("stats", "--redis", "redis://127.0.0.1:1", *options)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"trioqueue stats: {said}"), refused.stderr
