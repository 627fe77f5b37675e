"""The HTTP service under load: 5,000 POSTs from 50 clients, repeats and conflicts mixed in.

A worker pool runs in the same process, as ``trioqueue serve --handler`` runs
it. Whatever order the concurrent requests arrive in, each id is stored by one
request (201, or 202 when the queue was full), a request with the stored payload
gets 200 and one with another payload 409; the counters say the same, and every
stored job runs exactly once.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue.http import create_app

from .http_server import served

REQUESTS = 5_000
CLIENTS = 50


def _requests(seed: int) -> list[tuple[str, dict[str, Any]]]:
    """(id, payload) pairs: 75 % new ids, 20 % an earlier id again, 5 % another payload."""
    rng = random.Random(seed)
    sent: list[tuple[str, dict[str, Any]]] = []
    for n in range(REQUESTS):
        roll = rng.random()
        if sent and roll < 0.20:
            sent.append(rng.choice(sent))
        elif sent and roll < 0.25:
            job_id, _ = rng.choice(sent)
            sent.append((job_id, {"n": n, "other": True}))
        else:
            sent.append((f"e{n}", {"n": n}))
    return sent


# 16 s on a quiet 2-core machine, over 60 s beside the suite's other processes on a slow one
@pytest.mark.time_limit(240)
async def test_5000_posts_from_50_clients_each_id_stored_once_and_run_once():
    backend = trioqueue.MemoryBackend(256)  # small enough to be full at times: 202s
    runs: collections.Counter[str] = collections.Counter()

    async def handler(job: trioqueue.Job) -> None:
        runs[job.id] += 1

    work = _requests(seed=3)
    answers: list[tuple[str, dict[str, Any], int]] = []
    async with (
        trioqueue.open_worker_pool(backend, handler, workers=16) as pool,
        served(create_app(backend, concurrency=64)) as http,
    ):
        send, receive = trio.open_memory_channel[tuple[str, dict[str, Any]]](0)

        async def client(mine: trio.MemoryReceiveChannel[tuple[str, dict[str, Any]]]) -> None:
            async with mine:
                async for job_id, payload in mine:
                    reply = await http.post("/jobs", json={"id": job_id, "payload": payload})
                    answers.append((job_id, payload, reply.status_code))

        async with trio.open_nursery() as nursery:
            async with receive:
                for _ in range(CLIENTS):
                    nursery.start_soon(client, receive.clone())
            async with send:
                for item in work:
                    await send.send(item)
        pool.mark_producer_finished()
    statuses = collections.Counter(status for _, _, status in answers)
    assert sum(statuses.values()) == REQUESTS
    assert set(statuses) <= {200, 201, 202, 409}
    stored: dict[str, dict[str, Any]] = {}
    for job_id, payload, status in answers:
        if status in (201, 202):
            assert job_id not in stored, f"{job_id} stored twice"
            stored[job_id] = payload
    for job_id, payload, status in answers:  # every other answer follows the stored one
        if status == 200:
            assert payload == stored[job_id]
        elif status == 409:
            assert payload != stored[job_id]
    stats = await backend.stats()
    assert stats.enqueued == statuses[201] + statuses[202] == len(stored)
    assert stats.deduplicated == statuses[200]
    assert stats.conflicts == statuses[409]
    assert runs == collections.Counter(dict.fromkeys(stored, 1))  # each exactly once
    assert stats.conserved
    assert min(statuses[200], statuses[409]) > 0  # the mix was exercised
