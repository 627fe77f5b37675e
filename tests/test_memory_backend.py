"""What only the memory backend does (the contract suite covers the rest)."""

from __future__ import annotations

import time

import trio

import trioqueue
from trioqueue import Queue


async def test_records_carry_wall_clock_times_spaced_by_trios_clock(autojump_clock):
    backend = trioqueue.MemoryBackend()
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    await trio.sleep(100)  # on the mock clock: no real time passes
    await queue.enqueue("b", id="b")
    first, second = await queue.status("a"), await queue.status("b")
    assert first is not None
    assert second is not None
    assert abs(first.created_at - time.time()) < 60  # a date, as on Redis
    assert second.created_at - first.created_at == 100  # exact, as Trio's clock
