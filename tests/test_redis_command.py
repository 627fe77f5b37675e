"""A handler's own Redis calls: `RedisBackend.command` on the pool's connections.

Handlers reach the backend their pool holds with `trioqueue.current_redis()`
(or `current_backend()`), in the handler and in the tasks it starts; outside a
handler, and on another backend, the call says what to do instead.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import coredis
import pytest
import trio

import trioqueue
from trioqueue import BackendRefused, BackendUnavailable, TrioqueueError

from .redis_server import free_port

if TYPE_CHECKING:
    from .redis_server import RedisServer


def queue_name() -> str:
    return "{c-" + uuid.uuid4().hex[:10] + "}"


async def test_a_command_goes_on_the_backends_connection_and_gives_the_reply(
    redis_server: RedisServer,
):
    key = queue_name() + ".mine"
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        assert await backend.command("SET", key, "v1") in (b"OK", "OK")
        assert await backend.command("GET", key) == b"v1"
        assert await backend.command("INCRBY", key + ":n", 5) == 5
        assert await backend.command("GET", key + ":missing") is None
        assert await backend.command("DEL", key, key + ":n") == 2
    async with coredis.Redis.from_url(redis_server.url) as redis:
        assert await redis.exists([key]) == 0


async def test_a_refused_command_is_backend_refused_with_the_servers_words(
    redis_server: RedisServer,
):
    key = queue_name() + ".list"
    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name(), min_idle=30) as backend:
        await backend.command("RPUSH", key, "a")
        with pytest.raises(BackendRefused) as raised:
            await backend.command("INCR", key)
        assert "refused INCR" in str(raised.value)
        assert "wrong kind of value" in str(raised.value)  # (coredis drops "WRONGTYPE")
        # the connection is still good after a refusal
        assert await backend.command("LLEN", key) == 1
        with pytest.raises(TypeError, match=r"takes the command"):
            await backend.command()


async def test_a_command_to_an_unreachable_redis_is_backend_unavailable():
    url = f"redis://127.0.0.1:{free_port()}/0"
    async with trioqueue.RedisBackend(url, queue=queue_name(), min_idle=30) as backend:
        with pytest.raises(BackendUnavailable):
            await backend.command("PING")


async def test_handlers_reach_their_pools_redis_even_in_tasks_they_start(
    redis_server: RedisServer,
):
    name = queue_name()
    seen: list[bool] = []
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend:

        async def handler(job: trioqueue.Job) -> None:
            redis = trioqueue.current_redis()
            seen.append(redis is backend and trioqueue.current_backend() is backend)
            async with trio.open_nursery() as nursery:  # a task the handler starts knows it too
                nursery.start_soon(redis.command, "SET", f"{name}.done:{job.payload}", 1)

        queue = trioqueue.Queue(backend)
        await queue.enqueue_many(list(range(10)))
        async with trioqueue.open_worker_pool(backend, handler, workers=4) as pool:
            pool.mark_producer_finished()
        keys = [f"{name}.done:{n}" for n in range(10)]
        assert await backend.command("EXISTS", *keys) == 10
    assert seen == [True] * 10


async def test_outside_a_handler_and_on_memory_it_says_what_to_use():
    with pytest.raises(TrioqueueError, match=r"use the backend you made"):
        trioqueue.current_redis()
    with pytest.raises(TrioqueueError, match=r"use the backend you made"):
        trioqueue.current_backend()
    backend = trioqueue.MemoryBackend()
    errors: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        assert trioqueue.current_backend() is backend
        try:
            trioqueue.current_redis()
        except TrioqueueError as exc:
            errors.append(str(exc))

    await trioqueue.Queue(backend).enqueue(1)
    async with trioqueue.open_worker_pool(backend, handler) as pool:
        pool.mark_producer_finished()
    (error,) = errors
    assert "not on one RedisBackend" in error
    assert "MemoryBackend" in error
