"""The Redis seed's own example, end to end: cache warm-ups, uploads, thumbnails.

A simple queue warms the page cache (a lost warm-up costs one slow page); an
upload's handler answers with a thumbnail job published to the reliable
``{thumbnails}`` queue, whose key lives a day after the last push; a render
pool completes it, and it never comes back, however much time passes.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import coredis
import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import Queue

if TYPE_CHECKING:
    from .redis_server import RedisServer

MIN_IDLE = 60.0  # a claim idle this long belongs to no live worker
DAY = 24 * 3600.0


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Jump only after 20 ms with every task blocked: a Redis reply may be on its way."""
    return trio.testing.MockClock(autojump_threshold=0.02)


def tagged(name: str) -> str:
    """The queue's key with a hash tag of its own (one test run's queues never meet)."""
    return "{" + f"{name}-{uuid.uuid4().hex[:8]}" + "}"


async def test_a_published_warmup_and_upload_reach_their_handlers(
    redis_server: RedisServer, autojump_clock: trio.testing.MockClock
):
    url, clock = redis_server.url, trio.current_time
    warmed: list[str] = []
    rendered: list[str] = []

    async def warm_cache(job: trioqueue.Job) -> None:
        warmed.append(job.payload["page"])

    async def queue_thumbnail(job: trioqueue.Job) -> dict[str, str]:
        return {"image": job.payload["image"]}

    async def render(job: trioqueue.Job) -> None:
        rendered.append(job.payload["image"])

    async with (
        trioqueue.RedisBackend(
            url, queue=tagged("cache.warmups"), reliable=False, clock=clock
        ) as warmups,
        trioqueue.RedisBackend(
            url, queue=tagged("uploads"), min_idle=MIN_IDLE, clock=clock
        ) as uploads,
        # the reply side: each publish keeps the queue a day; an unfed one expires
        trioqueue.RedisBackend(
            url, queue=tagged("thumbnails"), min_idle=MIN_IDLE, key_ttl=DAY, clock=clock
        ) as thumbnails,
    ):
        # leaving the block drains the pools from the last to the first: warm-ups,
        # then uploads (publishing the thumbnail job), then thumbnails
        async with (
            trioqueue.open_worker_pool(thumbnails, render),
            trioqueue.open_worker_pool(uploads, queue_thumbnail, reply_to=Queue(thumbnails)),
            trioqueue.open_worker_pool(warmups, warm_cache),
        ):
            await Queue(warmups).enqueue({"page": "/a"})
            await Queue(uploads).enqueue({"image": "cat.png"}, id="upload-1")
        assert warmed == ["/a"]
        assert rendered == ["cat.png"]
        thumbnail = await Queue(thumbnails).status(trioqueue.reply_id("upload-1"))
        assert thumbnail is not None
        assert thumbnail.state is trioqueue.JobState.COMPLETED
        async with coredis.Redis.from_url(url) as client:
            ttl = await client.pttl(thumbnails.keys.job_prefix + thumbnail.id)
            assert DAY * 1000 - 60_000 < ttl <= DAY * 1000  # its record leaves with the queue

        # time passes far beyond min_idle: a completed job never comes back
        await trio.sleep(3 * MIN_IDLE)
        for backend in (warmups, uploads, thumbnails):
            report = await backend.sweep()
            assert report.recovered == 0
            assert await backend.claim(10, lease=MIN_IDLE, block=0) == []
            stats = await backend.stats()
            assert (stats.succeeded, stats.gauges.held) == (1, 0)
            assert stats.conserved
        assert (warmed, rendered) == (["/a"], ["cat.png"])
