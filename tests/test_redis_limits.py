"""Redis at its limits: out of memory, hostile records, settings Redis cannot hold."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
import trio

import trioqueue
from trioqueue import BackendOutOfMemory, Queue

from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import Iterator


def queue_name() -> str:
    return "{t-" + uuid.uuid4().hex[:12] + "}"


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
