"""Seed 001's image service: a simple queue, a reliable one, and a stream feeding it.

- ``cache.warmups``: a simple queue (at most once). A lost warm-up costs one
  slow page, so a warm-up a crash interrupts is not run again.
- ``{thumbnails}``: a reliable queue (at least once). A job leaves Redis only
  when its handler is done; a crashed worker's job comes back after MIN_IDLE.
  Its keys live a day after the last job put in: a queue nobody feeds expires.
- ``{uploads}``: a stream, read by the group ``thumbnailer``, which answers each
  upload with a thumbnail job on ``{thumbnails}``.
"""

import datetime
import os

import trio

import trioqueue

REDIS_URL = os.environ.get("TRIOQUEUE_REDIS_URL", "redis://localhost:6379/0")
# longer than the slowest render ever takes: a claim idle this long has no live worker
MIN_IDLE = 60.0
DAY = datetime.timedelta(days=1).total_seconds()


cached: list[str] = []
rendered: list[str] = []


async def warm_cache(job: trioqueue.Job) -> None:
    cached.append(job.payload["page"])  # the page would be rendered and cached here


async def queue_thumbnail(upload: trioqueue.Job) -> dict[str, str]:
    return {"image": upload.payload["image"]}  # published to {thumbnails}


async def render(job: trioqueue.Job) -> None:
    rendered.append(job.payload["image"])  # the thumbnail would be made here


async def main() -> None:
    async with (
        trioqueue.RedisBackend(REDIS_URL, queue="cache.warmups", reliable=False) as warmups,
        trioqueue.RedisBackend(
            REDIS_URL, queue="{thumbnails}", min_idle=MIN_IDLE, key_ttl=DAY
        ) as thumbnails,
        trioqueue.RedisBackend(
            REDIS_URL, stream="{uploads}", group="thumbnailer", min_idle=MIN_IDLE
        ) as uploads,
    ):
        for backend in (warmups, thumbnails, uploads):
            print("using", backend)  # which Redis (its password hidden), which queue
        # leaving the block drains the pools from the last one opened to the first:
        # the warm-ups, then the uploads (which publish), then the thumbnails
        async with (
            trioqueue.open_worker_pool(thumbnails, render),
            trioqueue.open_worker_pool(
                uploads, queue_thumbnail, reply_to=trioqueue.Queue(thumbnails)
            ),
            trioqueue.open_worker_pool(warmups, warm_cache),
        ):
            await trioqueue.Queue(warmups).enqueue({"page": "/index.html"})
            await trioqueue.Queue(uploads).enqueue({"image": "cat.png"}, id="upload-1")
        job = await trioqueue.Queue(thumbnails).status(trioqueue.reply_id("upload-1"))
        assert job is not None
    print("pages cached:", cached)
    print("thumbnails rendered:", rendered)
    print("the thumbnail job is", job.state.value)


if __name__ == "__main__":
    trio.run(main)
