"""A real Redis Cluster (3 masters, 3 replicas): routing, the URL's switch, a failover.

The contract suite runs on the session's cluster as its ``redis-cluster``
variant; these tests are about what only a cluster has. A failover kills the
master that serves the queue's slot, so it gets a cluster of its own.
"""

from __future__ import annotations

import collections
import json
import math
import time
import uuid
from typing import TYPE_CHECKING

import pytest
import trio

import trioqueue
from trioqueue import Queue
from trioqueue._backends.redis._keys import hash_slot

from .redis_cluster import RedisCluster, array_items, command, master_index, ok, started_cluster
from .test_cli_redis import cli

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator


def tag_on(cluster: RedisCluster, master: int) -> str:
    """A fresh queue name whose slot *master* (0, 1 or 2) serves."""
    while True:
        name = "{n-" + uuid.uuid4().hex[:8] + "}"
        if master_index(hash_slot(name)) == master:
            return name


async def test_a_queue_on_another_node_than_the_urls_runs_through_the_cluster(redis_cluster):
    name = tag_on(redis_cluster, 2)  # the URL names master 0
    assert redis_cluster.master_of(name) is redis_cluster.masters[2]
    seen: list[int] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append(job.payload)

    url = redis_cluster.url + "?cluster=yes"
    async with trioqueue.RedisBackend(url, queue=name, min_idle=30) as backend:
        await Queue(backend).enqueue_many(list(range(20)))
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, workers=4):
                pass
        stats = await backend.stats()
    assert sorted(seen) == list(range(20))
    assert (stats.succeeded, stats.gauges.held) == (20, 0)


async def test_a_single_server_url_to_a_cluster_says_to_add_cluster_yes(redis_cluster):
    name = tag_on(redis_cluster, 1)  # not on the node the URL names: MOVED
    async with trioqueue.RedisBackend(redis_cluster.url, queue=name, min_idle=30) as backend:
        with pytest.raises(trioqueue.ConfigurationError) as raised:
            await Queue(backend).enqueue("x")
    assert str(raised.value) == (
        f"Redis at {redis_cluster.url} is a Redis Cluster node, and queue {name!r} lives "
        "on another node: add ?cluster=yes to the URL"
    )


async def test_on_the_cluster_client_a_plain_name_is_refused_in_one_line(redis_cluster):
    url = redis_cluster.url + "?cluster=yes"
    async with trioqueue.RedisBackend(url, queue="cache.warmups", min_idle=30) as backend:
        with pytest.raises(trioqueue.ConfigurationError) as raised:
            await Queue(backend).enqueue({"page": "/a"})
    assert str(raised.value) == (
        "queue 'cache.warmups': on a Redis Cluster every key of a queue shares one slot; "
        "name it with a hash tag, '{cache.warmups}'"
    )


async def test_a_stream_source_on_another_node_runs_through_the_cluster(redis_cluster):
    stream = tag_on(redis_cluster, 1)
    seen: list[int] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append(job.payload)
        if job.attempt == 1 and job.payload % 5 == 0:
            raise ValueError("once more")  # a redelivery, woken through the wake stream

    url = redis_cluster.url + "?cluster=yes"
    policy = trioqueue.RetryPolicy(base_delay=0.01, max_delay=0.01)
    async with trioqueue.RedisBackend(url, stream=stream, group="g", min_idle=30) as backend:
        await Queue(backend).enqueue_many(list(range(20)))
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, workers=4, retry=policy):
                pass
        stats = await backend.stats()
    assert sorted(seen) == sorted([*range(20), 0, 5, 10, 15])
    assert (stats.succeeded, stats.retries, stats.gauges.held) == (20, 4, 0)


async def test_on_the_cluster_a_plain_stream_name_is_refused_in_one_line(redis_cluster):
    url = redis_cluster.url + "?cluster=yes"
    async with trioqueue.RedisBackend(url, stream="uploads", group="thumbnailer") as backend:
        with pytest.raises(trioqueue.ConfigurationError) as raised:
            await Queue(backend).enqueue({"image": "a.png"})
    assert str(raised.value) == (
        "stream 'uploads': on a Redis Cluster the stream and its group's keys share one "
        "slot; name it with a hash tag, '{uploads}'"
    )


async def test_a_sharded_queue_spreads_over_the_masters_and_runs_every_job(redis_cluster):
    while True:  # a name whose three shards fall on the three masters
        name = "s-" + uuid.uuid4().hex[:8]
        shards = trioqueue.ShardedBackend.on_redis(
            redis_cluster.url + "?cluster=yes", queue=name, shards=3, min_idle=30
        )
        masters = {master_index(hash_slot(shard.keys.ready)) for shard in shards.shards}
        if masters == {0, 1, 2}:
            break
    seen: list[int] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append(job.payload)

    async with shards as backend:
        await Queue(backend).enqueue_many(list(range(60)), ids=[f"j{n}" for n in range(60)])
        held = [(await shard.stats()).gauges.queue_depth for shard in backend.shards]
        assert sum(held) == 60
        assert min(held) > 0  # every master holds part of the queue
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, workers=4):
                pass
        stats = await backend.stats()
    assert sorted(seen) == list(range(60))
    assert (stats.succeeded, stats.gauges.held) == (60, 0)


def test_the_command_line_takes_a_cluster_url(redis_cluster):
    url, name = redis_cluster.url + "?cluster=yes", tag_on(redis_cluster, 2)
    given = cli("enqueue", '{"n": 1}', "--redis", url, "--queue", name)
    assert given.returncode == 0, given.stderr
    shown = cli("stats", "--json", "--interval", "0.05", "--redis", url, "--queue", name)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["ready"] == 1


@pytest.fixture
def own_cluster() -> Iterator[RedisCluster]:
    """A cluster of the test's own: it loses a master, or a slot moves."""
    with started_cluster() as cluster:
        yield cluster


JOBS = 300


async def run_through(
    url: str,
    queue_name: str,
    handler: trioqueue.Handler,
    fault: Callable[[], Awaitable[None]],
    *,
    min_idle: float,
) -> dict[int, trioqueue.JobRecord | None]:
    """`JOBS` jobs through a producer and an 8-worker pool; *fault* once a third is in.

    The producer sends a job again (same id, so never twice) while the cluster
    answers BackendUnavailable. Returns each job's record once all have finished.
    """
    a_third = trio.Event()

    async def produce(queue: Queue) -> None:
        for n in range(JOBS):
            while True:
                try:
                    await queue.enqueue(n, id=f"j{n}")
                except trioqueue.BackendUnavailable:
                    await trio.sleep(0.05)  # a failover, a moving slot: again
                else:
                    break
            if n == JOBS // 3:
                a_third.set()
            await trio.sleep(0.002)

    async with trioqueue.RedisBackend(url, queue=queue_name, min_idle=min_idle) as backend:
        queue = Queue(backend)
        with trio.fail_after(50):
            async with trioqueue.open_worker_pool(backend, handler, workers=8, prefetch=0):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(produce, queue)
                    await a_third.wait()
                    await fault()
                # every job accepted; wait until all have finished (a claim a replica
                # never saw is on the ready list again, one whose outcome it never saw
                # comes back through the sweep after min_idle)
                while True:
                    stats = await backend.stats()
                    if stats.succeeded >= JOBS and stats.gauges.held == 0:
                        break
                    await trio.sleep(0.2)
        return {n: await queue.status(f"j{n}") for n in range(JOBS)}


def assert_all_completed(records: dict[int, trioqueue.JobRecord | None]) -> None:
    assert [n for n, record in records.items() if record is None] == []
    assert {n: r.state for n, r in records.items() if r and r.state.value != "completed"} == {}


@pytest.mark.parametrize("url_names", ["another node", "its node", "its node and another"])
async def test_a_failover_of_the_queues_master_loses_no_job(own_cluster, url_names):
    """Kill the master that serves the queue while a producer and a pool run.

    Its replica takes over (cluster-node-timeout 1 s). Every job accepted is
    completed. A job may run twice only if a run of it was going on around the
    kill: its claim or its outcome may have reached the master and not the
    replica (Redis replicates after it replies). No other job runs twice. The
    URL names another master, or the killed one (alone, or before another):
    once the cluster is known, the URL's node does not matter, and a new backend
    given a URL with another node too connects through that one.
    """
    cluster = own_cluster
    name = tag_on(cluster, 1 if url_names == "another node" else 0)
    doomed = cluster.master_of(name)
    nodes = {
        "another node": [cluster.masters[0]],
        "its node": [doomed],
        "its node and another": [doomed, cluster.masters[1]],
    }[url_names]
    url = "redis://" + ",".join(f"127.0.0.1:{node.port}" for node in nodes) + "?cluster=yes"
    runs: collections.defaultdict[int, list[tuple[float, float]]] = collections.defaultdict(list)
    killed_at = math.inf

    async def handler(job: trioqueue.Job) -> None:
        started = time.monotonic()
        try:
            await trio.sleep(0.01)
        finally:
            runs[job.payload].append((started, time.monotonic()))

    async def kill() -> None:
        nonlocal killed_at
        killed_at = time.monotonic()
        doomed.stop(kill=True)

    records = await run_through(url, name, handler, kill, min_idle=3)
    assert cluster.master_of(name) is not doomed  # the replica serves the slot now
    assert_all_completed(records)
    assert sorted(runs) == list(range(JOBS))  # every job ran
    twice = {n for n, spans in runs.items() if len(spans) > 1}
    around_the_kill = {
        n
        for n, spans in runs.items()
        if spans[0][0] <= killed_at + 0.05 and spans[0][1] >= killed_at - 0.1
    }
    assert twice <= around_the_kill
    if len(nodes) > 1:  # a new process: the URL's first node is down, its second is not
        with trio.fail_after(15):
            async with trioqueue.RedisBackend(url, queue=name, min_idle=3) as fresh:
                await Queue(fresh).enqueue("after", id="after")
                [claim] = await fresh.claim(5, lease=30, block=0)
                assert claim.job.id == "after"
                assert await fresh.ack(claim)


async def test_moving_the_queues_slot_during_a_run_loses_no_job(own_cluster):
    """Reshard the queue's slot to another master, a few keys at a time, while a
    producer and a pool run: every job completes, and none runs twice."""
    cluster = own_cluster
    name = tag_on(cluster, 1)
    source, target = cluster.masters[1], cluster.masters[2]
    runs: collections.Counter[int] = collections.Counter()
    moved = 0

    async def handler(job: trioqueue.Job) -> None:
        runs[job.payload] += 1
        await trio.sleep(0.005)

    async def reshard() -> None:
        nonlocal moved
        moved = await trio.to_thread.run_sync(
            lambda: cluster.move_slot(hash_slot(name), source, target, batch=5, pause=0.02)
        )

    records = await run_through(cluster.url + "?cluster=yes", name, handler, reshard, min_idle=5)
    assert moved > 0
    assert cluster.master_of(name) is target
    assert_all_completed(records)
    assert sorted(runs) == list(range(JOBS))
    assert {n: count for n, count in runs.items() if count > 1} == {}


async def test_once_the_cluster_is_known_the_urls_node_may_die(own_cluster):
    """The URL names one node, which dies; the queue lives on another master.

    New connections (each blocking claim waits on one of its own) go through
    the nodes the cluster named, and nothing is taken for an outage.
    """
    cluster = own_cluster
    name = tag_on(cluster, 1)
    async with trioqueue.RedisBackend(
        cluster.masters[0].url + "?cluster=yes", queue=name, min_idle=30
    ) as backend:
        queue = Queue(backend)
        assert await backend.claim(1, lease=30, block=0.1) == []  # the cluster is known
        cluster.masters[0].stop(kill=True)
        claimed: list[str] = []

        async def claim_one() -> None:
            [claim] = await backend.claim(1, lease=30, block=10)
            claimed.append(claim.job.id)

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for _ in range(4):  # four waits at once: three new connections
                    nursery.start_soon(claim_one)
                await trio.sleep(0.5)
                await queue.enqueue_many(["a", "b", "c", "d"], ids=["a", "b", "c", "d"])
        assert sorted(claimed) == ["a", "b", "c", "d"]


async def test_a_call_refused_while_the_slot_is_half_moved_goes_through_when_the_move_ends(
    own_cluster, monkeypatch
):
    """The queue's slot is MIGRATING, a few keys moved: the enqueue's script, which
    names keys on both nodes, is answered TRYAGAIN, which the client sends again
    itself (no outage); once the move ends, MOVED takes it to the new master,
    where the job is stored once."""
    cluster = own_cluster
    name = tag_on(cluster, 1)
    slot = hash_slot(name)
    source, target = cluster.masters[1], cluster.masters[2]
    async with trioqueue.RedisBackend(
        cluster.url + "?cluster=yes", queue=name, min_idle=30
    ) as backend:
        queue = Queue(backend)
        await queue.enqueue_many(["x"] * 20, ids=[f"x{n}" for n in range(20)])
        ok(command(target.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(source)))
        ok(command(source.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(target)))
        some = [
            k.decode()
            for k in array_items(command(source.port, "CLUSTER", "GETKEYSINSLOT", slot, 5))
        ]
        ok(command(source.port, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *some))
        followed = backend._conn.client.followed
        stored: list[trioqueue.Receipt] = []

        async def enqueue() -> None:
            stored.append(await queue.enqueue("b", id="b"))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(enqueue)
                while followed["TRYAGAIN"] == 0:  # noqa: ASYNC110 (a condition, not a timer)
                    await trio.sleep(0.01)
                assert not stored  # it waits for the move
                await trio.to_thread.run_sync(
                    lambda: cluster.move_slot(slot, source, target, batch=100, pause=0)
                )
        assert cluster.master_of(name) is target
        assert followed["MOVED"] >= 1
        assert [receipt.id for receipt in stored] == ["b"]
        assert (await backend.stats()).gauges.queue_depth == 21
