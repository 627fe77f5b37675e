"""A Redis queue's shared settings: stored with it, followed by whoever joins, changed in place."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

import trioqueue
from trioqueue import ConfigurationError, Queue, QueueFull, QueueSettings

if TYPE_CHECKING:
    from .redis_server import RedisServer


def queue_name() -> str:
    return "{s-" + uuid.uuid4().hex[:12] + "}"


async def test_a_new_queue_stores_the_defaults_and_a_joiner_follows_them(
    redis_server: RedisServer,
):
    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as first:
        assert first.settings == QueueSettings(capacity=1000, reliable=True, key_ttl=None)
        await Queue(first).enqueue("x", id="x")
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, capacity=7, min_idle=30
    ) as joiner:
        assert joiner.settings == QueueSettings(capacity=7)  # not read yet: its own
        assert await joiner.pending() == 1  # reading needs no agreement
        with pytest.raises(ConfigurationError, match=r"capacity=1000 \(yours: 7\)"):
            await Queue(joiner).enqueue("y", id="y")


async def test_a_backend_left_without_settings_follows_the_queue(redis_server: RedisServer):
    name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, capacity=2, reliable=False, key_ttl=600
    ) as creator:
        await Queue(creator).enqueue("a", id="a")
    async with trioqueue.RedisBackend(redis_server.url, queue=name) as joiner:
        queue = Queue(joiner)
        await queue.enqueue("b", id="b")
        assert joiner.settings == QueueSettings(capacity=2, reliable=False, key_ttl=600.0)
        assert (joiner.capacity, joiner.reliable) == (2, False)
        with pytest.raises(QueueFull) as full:
            await queue.try_enqueue("c", id="c")
        assert full.value.capacity == 2


async def test_every_disagreeing_setting_is_named_at_once_before_anything_changes(
    redis_server: RedisServer,
):
    name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, capacity=10, key_ttl=60, min_idle=30
    ) as first:
        await Queue(first).enqueue("x", id="x")
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, capacity=20, reliable=False, key_ttl=30
    ) as other:
        with pytest.raises(ConfigurationError) as caught:
            await Queue(other).enqueue("y", id="y")
        assert await other.status("y") is None  # refused before it changed anything
    message = str(caught.value)
    assert "capacity=10 (yours: 20)" in message
    assert "mode=reliable (yours: simple)" in message
    assert "key_ttl=60.0 (yours: 30.0)" in message
    assert "trioqueue queue configure" in message
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as reader:
        assert (await reader.stats()).enqueued == 1
        stored = QueueSettings(capacity=10, reliable=True, key_ttl=60.0)
        assert await reader.stored_settings() == stored


async def test_a_reliable_claim_needs_min_idle_and_producers_and_simple_queues_do_not(
    redis_server: RedisServer,
):
    # seed 001: with a recovery set min_idle is required, and a consumer without it
    # does not start; the default of 30 s belongs to `trioqueue worker --min-idle`
    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name) as producer:
        await Queue(producer).enqueue("x", id="x")  # enqueueing and reading need none
        assert (await producer.stats()).gauges.queue_depth == 1
        with pytest.raises(ConfigurationError) as refused:
            await producer.claim(1, lease=producer.default_lease, block=0)
    said = str(refused.value)
    assert "with a recovery set min_idle is required: give min_idle=SECONDS" in said
    assert "--min-idle defaults to 30" in said
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as worker:
        [claim] = await worker.claim(1, lease=worker.default_lease, block=0)  # nothing lost
        assert claim.job.id == "x"
    stream = "{s-" + name.strip("{}") + "}"
    async with trioqueue.RedisBackend(redis_server.url, stream=stream, group="g") as reader:
        with pytest.raises(ConfigurationError, match="min_idle is required"):
            await reader.claim(1, lease=reader.default_lease, block=0)
    simple_name = queue_name()
    async with trioqueue.RedisBackend(
        redis_server.url, queue=simple_name, reliable=False
    ) as simple:
        assert simple.default_lease == 30.0
        await Queue(simple).enqueue("x", id="x")
        [claim] = await simple.claim(1, lease=simple.default_lease, block=0)  # no recovery set
    async with trioqueue.RedisBackend(
        redis_server.url, queue=simple_name, recovery_zset=f"{simple_name}.mine", min_idle=30
    ) as recovering:
        with pytest.raises(ConfigurationError, match=r"is a simple queue.*drop recovery_zset"):
            await recovering.claim(1, lease=30, block=0)


async def test_a_raised_capacity_takes_effect_in_a_process_that_joined_before(
    redis_server: RedisServer,
):
    name = queue_name()
    async with (
        trioqueue.RedisBackend(redis_server.url, queue=name, capacity=2, min_idle=30) as running,
        trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as operator,
    ):
        queue = Queue(running)
        for n in range(4):
            await queue.submit(n, id=str(n))  # two ready, two stored for lack of room
        assert (await running.stats()).gauges.queue_depth == 2
        settings = await operator.configure(capacity=5)
        assert settings == QueueSettings(capacity=5, reliable=True, key_ttl=None)
        assert operator.capacity == 5
        gauges = (await running.stats()).gauges
        assert (gauges.queue_depth, gauges.backlog) == (4, 4)  # the stored two moved up
        await queue.try_enqueue(4, id="4")  # room for a fifth although it was told 2
        with pytest.raises(QueueFull) as full:
            await queue.try_enqueue(5, id="5")
        assert full.value.capacity == 5


async def test_mode_and_key_ttl_change_only_on_a_queue_without_jobs(redis_server: RedisServer):
    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend:
        queue = Queue(backend)
        await queue.enqueue("x", id="x")
        for change in ({"reliable": False}, {"key_ttl": 60}):
            with pytest.raises(ConfigurationError, match="holds 1 waiting and 0 claimed jobs"):
                await backend.configure(**change)
        [claim] = await backend.claim(1, lease=30, block=0)
        with pytest.raises(ConfigurationError, match="holds 0 waiting and 1 claimed jobs"):
            await backend.configure(key_ttl=60)
        assert backend.settings == QueueSettings()  # refused: nothing changed
        await backend.ack(claim)
        assert await backend.configure(key_ttl=60) == QueueSettings(key_ttl=60.0)
        assert await backend.configure(capacity=3) == QueueSettings(capacity=3, key_ttl=60.0)
        assert await backend.configure(no_key_ttl=True) == QueueSettings(capacity=3)
        assert await backend.configure(reliable=False) == QueueSettings(capacity=3, reliable=False)


async def test_configure_refuses_a_queue_that_does_not_exist(redis_server: RedisServer):
    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend:
        with pytest.raises(ConfigurationError, match="does not exist here yet"):
            await backend.configure(capacity=5)
        assert await backend.stored_settings() is None
        assert await backend.pending() == 0


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"capacity": 0}, r"capacity"),
        ({"key_ttl": 0}, r"key_ttl=0\)"),
        ({"key_ttl": 5, "no_key_ttl": True}, "give one of them"),
    ],
)
async def test_configure_refuses_bad_values_before_any_change(
    redis_server: RedisServer, options, match
):
    name = queue_name()
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend:
        await Queue(backend).enqueue("x", id="x")
        with pytest.raises(ConfigurationError, match=match):
            await backend.configure(**options)
        assert backend.settings == QueueSettings()


@pytest.mark.parametrize("sharded", [False, True])
async def test_a_pause_is_stored_with_the_queue_and_every_process_follows_it(
    redis_server: RedisServer, sharded: bool
):
    name = queue_name()

    def open_backend() -> trioqueue.RedisBackend | trioqueue.ShardedBackend:
        if sharded:
            return trioqueue.ShardedBackend.on_redis(
                redis_server.url, queue=name, shards=3, min_idle=30
            )
        return trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30)

    async with open_backend() as reader:  # reading creates no queue
        assert not await reader.is_paused()
        assert await reader.stored_settings() is None
    async with open_backend() as operator, open_backend() as worker:
        await Queue(operator).enqueue("x", id="x")
        await Queue(operator).pause()
        assert await worker.is_paused()
        assert await worker.claim(10, lease=30, block=0.2) == []
        await Queue(worker).resume()
        assert not await operator.is_paused()
        claims = await operator.claim(10, lease=30, block=0.2)
        assert [claim.job.id for claim in claims] == ["x"]
        await operator.ack(claims[0])
