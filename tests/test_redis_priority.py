"""Priorities on Redis: one ready list per level, named after the queue.

The contract suite (``contract/test_priority.py``) checks the order on every
backend; these check what only Redis has: the lists another client can push to,
and a stream source, which has no levels.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import coredis
import pytest

import trioqueue
from trioqueue import Queue

if TYPE_CHECKING:
    from .redis_server import RedisServer


def queue_name() -> str:
    return "{p-" + uuid.uuid4().hex[:10] + "}"


async def test_each_level_is_a_list_beside_the_queue_that_a_plain_push_feeds(
    redis_server: RedisServer,
):
    name = queue_name()
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend,
    ):
        queue = Queue(backend)
        await queue.enqueue("mine", id="mine", priority=2)
        assert await raw.llen(f"{name}.priority+2") == 1
        # the queue's own list holds only the wake element (a NUL byte): consumers
        # waiting for work block on that list alone, and one must wake
        assert await raw.lrange(name, 0, -1) == [b"\x00"]
        # another client pushes a bare JSON payload onto a level's list, as onto the queue's
        await raw.lpush(name, [json.dumps({"plain": 1})])
        await raw.lpush(f"{name}.priority+1", [json.dumps({"pushed": 1})])
        await raw.lpush(f"{name}.priority-2", [json.dumps({"bulk": 1})])
        gauges = (await queue.stats()).gauges
        assert gauges.ready_by_priority == {2: 1, 1: 1, 0: 1, -1: 0, -2: 1}
        claims = await backend.claim(10, lease=30, block=0)
        order = [(c.job.payload, c.job.priority) for c in claims]
        assert order == [("mine", 2), ({"pushed": 1}, 1), ({"plain": 1}, 0), ({"bulk": 1}, -2)]
        adopted = await queue.status(claims[1].job.id)
        assert adopted is not None
        assert adopted.priority == 1
        for claim in claims:
            assert await backend.ack(claim)


async def test_a_stream_source_refuses_a_priority_and_stores_nothing(redis_server: RedisServer):
    stream = "{s-" + uuid.uuid4().hex[:10] + "}"
    async with trioqueue.RedisBackend(
        redis_server.url, stream=stream, group="g", min_idle=30
    ) as backend:
        queue = Queue(backend)
        with pytest.raises(ValueError, match="a stream source has no priorities"):
            await queue.enqueue("x", id="x", priority=1)
        assert await queue.status("x") is None
        await queue.enqueue("y", id="y", priority=0)  # the one level it has
        assert await backend.pending() == 1


async def test_a_wake_element_a_blmove_took_is_never_doubled(redis_server: RedisServer):
    """While a consumer's BLMOVE holds the wake element, a job at another level pushes
    no second one: the consumer's claim takes it, and a second element would be
    counted as a job once the first is taken."""
    name = queue_name()
    async with (
        coredis.Redis.from_url(redis_server.url) as raw,
        trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=30) as backend,
    ):
        queue = Queue(backend)
        await queue.enqueue("a", id="a", priority=2)
        # what a waiting consumer's BLMOVE does with the wake element
        wake = await raw.lmove(name, backend.keys.processing, "RIGHT", "LEFT")
        assert wake == b"\x00"
        await queue.enqueue("b", id="b", priority=1)
        assert await raw.llen(name) == 0  # no second wake element
        assert (await queue.stats()).gauges.queue_depth == 2
        # the consumer's claim, with what its BLMOVE moved (as RedisBackend.claim sends it)
        rows, _ = await backend._run("claim", 10, 30, "", "", wake)
        assert [row[0] for row in rows] == [b"a", b"b"]
        stats = await queue.stats()
        assert (stats.gauges.queue_depth, stats.gauges.inflight) == (0, 2)
        assert stats.conserved, stats
        assert await raw.llen(name) == 0
