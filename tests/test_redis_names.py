"""Queue names on real servers: any name on a single server, a hash tag on a cluster.

Seed 001's first example is a simple queue named ``cache.warmups``; it runs
under that name, verbatim. On a Redis Cluster (here one node that holds every
slot: enough for the server's own CROSSSLOT rule) a name without a hash tag is
refused at the first call, in one line naming the tag; a tagged one works.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import coredis
import pytest
import trio

import trioqueue
from trioqueue import Queue

from .redis_cluster import command
from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def single_server() -> Iterator[RedisServer]:
    """A server of this test's own: the plain name is the seed's, shared with no other test."""
    server = RedisServer(find_server_binary())
    server.start()
    yield server
    server.close()


@pytest.fixture
def one_node_cluster() -> Iterator[RedisServer]:
    """A Redis Cluster of one node holding all 16,384 slots."""
    server = RedisServer(find_server_binary(), extra=("--cluster-enabled", "yes"))
    server.start()
    try:
        assert command(server.port, "CLUSTER", "ADDSLOTSRANGE", "0", "16383") == b"+OK\r\n"
        deadline = time.monotonic() + 10
        while b"cluster_state:ok" not in command(server.port, "CLUSTER", "INFO"):
            assert time.monotonic() < deadline, "the one-node cluster never became ok"
            time.sleep(0.05)
        yield server
    finally:
        server.close()


async def test_the_seeds_warmup_queue_runs_under_its_plain_name(single_server):
    warmed: list[str] = []
    done = trio.Event()

    async def warm_cache(job: trioqueue.Job) -> None:
        warmed.append(job.payload["page"])
        if len(warmed) == 2:
            done.set()

    async with trioqueue.RedisBackend(
        single_server.url, queue="cache.warmups", reliable=False
    ) as warmups:
        assert warmups.keys.ready == "cache.warmups"  # the name, verbatim
        async with trioqueue.open_worker_pool(warmups, warm_cache):
            await Queue(warmups).enqueue({"page": "/a"})
            # the seed's producer: LPUSH of a JSON record by another program
            async with coredis.Redis.from_url(single_server.url) as client:
                await client.lpush("cache.warmups", [b'{"page": "/b"}'])
            with trio.fail_after(10):
                await done.wait()
        stats = await warmups.stats()
    assert sorted(warmed) == ["/a", "/b"]
    assert (stats.succeeded, stats.gauges.held) == (2, 0)


async def test_on_a_cluster_a_plain_name_is_refused_in_one_line_naming_the_tag(
    one_node_cluster,
):
    async with trioqueue.RedisBackend(one_node_cluster.url, queue="cache.warmups") as backend:
        with pytest.raises(trioqueue.ConfigurationError) as raised:
            await Queue(backend).enqueue({"page": "/a"})
    assert str(raised.value) == (
        "queue 'cache.warmups': on a Redis Cluster every key of a queue shares one slot; "
        "name it with a hash tag, '{cache.warmups}'"
    )
    async with trioqueue.RedisBackend(
        one_node_cluster.url, queue="{cache.warmups}", reliable=False
    ) as backend:
        await Queue(backend).enqueue({"page": "/a"})
        [claim] = await backend.claim(1, lease=30, block=0)
        assert claim.job.payload == {"page": "/a"}
