"""The floors of workload 5: the same items through the bare mechanisms, no job queue.

``bare_channel``: one Trio memory channel, a producer and *consumers* tasks, the
floor of the memory backend. ``bare_blmove``: a reliable-queue loop on coredis,
BLMOVE into a processing list then LREM, from *concurrency* tasks, the floor of a
reliable Redis queue that takes one job per round trip.
"""

from __future__ import annotations

import time

import coredis
import trio


async def bare_channel(items: int, consumers: int) -> float:
    """Items/s through one memory channel (buffer 64) with *consumers* tasks."""
    send, receive = trio.open_memory_channel[dict[str, int]](64)
    done = 0

    async def consume() -> None:
        nonlocal done
        async for _ in receive:
            done += 1

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(consumers):
            nursery.start_soon(consume)
        async with send:
            for i in range(items):
                await send.send({"i": i})
    assert done == items
    return items / (time.perf_counter() - start)


async def bare_blmove(url: str, items: int, concurrency: int) -> float:
    """Items/s through BLMOVE + LREM with *concurrency* tasks on one coredis client."""
    async with coredis.Redis.from_url(url, decode_responses=False) as client:
        await client.delete(["floor", "floor.processing"])
        for start in range(0, items, 1000):
            await client.lpush("floor", [str(i).encode() for i in range(start, start + 1000)])
        done = 0

        async def consume() -> None:
            nonlocal done
            while done < items:
                item = await client.blmove("floor", "floor.processing", "RIGHT", "LEFT", 0.05)
                if item is None:
                    continue
                await client.lrem("floor.processing", 1, item)
                done += 1

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(consume)
        return items / (time.perf_counter() - started)
