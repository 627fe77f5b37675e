"""Idempotent enqueue by job id and payload hash."""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import IdempotencyConflict, JobState, Queue, QueueFull
from trioqueue._job_input import prepare

from ..conftest import collect


@pytest.mark.server_clock
async def test_same_id_and_payload_returns_the_existing_job_and_runs_once(make_backend):
    backend = await make_backend()
    queue = Queue(backend)
    first = await queue.enqueue({"a": 1, "b": [1, 2]}, id="job-1")
    again = await queue.enqueue({"b": [1, 2], "a": 1}, id="job-1")  # key order differs
    assert (first.id, first.deduplicated) == ("job-1", False)
    assert (again.id, again.deduplicated) == ("job-1", True)
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen)):
        pass
    assert [job.id for job in seen] == ["job-1"]
    snap = await backend.stats()
    assert (snap.enqueued, snap.deduplicated, snap.succeeded) == (1, 1, 1)


@pytest.mark.server_clock
async def test_same_id_with_another_payload_conflicts_and_keeps_the_original(make_backend):
    queue = Queue(await make_backend())
    await queue.enqueue({"v": 1}, id="x")
    with pytest.raises(IdempotencyConflict, match=r"'x' already exists with a different payload"):
        await queue.enqueue({"v": 2}, id="x")
    with pytest.raises(ValueError, match="new id"):  # also a ValueError
        await queue.submit({"v": 3}, id="x")
    record = await queue.status("x")
    assert record is not None
    assert record.payload == {"v": 1}
    snap = await queue.stats()
    assert (snap.enqueued, snap.conflicts) == (1, 2)


@pytest.mark.server_clock
async def test_a_job_without_an_id_gets_a_fresh_one(make_backend):
    queue = Queue(await make_backend())
    receipts = [await queue.enqueue({"same": True}) for _ in range(3)]
    assert len({r.id for r in receipts}) == 3
    assert not any(r.deduplicated for r in receipts)


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_a_duplicate_is_found_even_when_the_queue_is_full(make_backend):
    queue = Queue(await make_backend(capacity=1))
    await queue.try_enqueue("only", id="only")
    receipt = await queue.try_enqueue("only", id="only")
    assert receipt.deduplicated
    with pytest.raises(QueueFull):
        await queue.try_enqueue("other")


@pytest.mark.parametrize("payload", [{1, 2}, b"bytes", object(), float("nan"), {"k": float("inf")}])
@pytest.mark.server_clock
async def test_a_payload_that_is_not_json_is_refused_with_a_type_error(make_backend, payload):
    queue = Queue(await make_backend())
    with pytest.raises(TypeError, match="JSON-serialisable"):
        await queue.enqueue(payload, id="bad")
    assert await queue.status("bad") is None
    assert (await queue.stats()).enqueued == 0


@pytest.mark.server_clock
async def test_a_payload_over_max_payload_is_refused_and_one_at_it_accepted(make_backend):
    backend = await make_backend()
    queue = Queue(backend, max_payload=100)
    at_limit = "x" * 98  # 100 bytes as JSON, with its quotes
    assert not (await queue.enqueue(at_limit, id="fits")).deduplicated
    with pytest.raises(ValueError, match="takes 101 bytes as JSON, over the queue's max_payload"):
        await queue.enqueue(at_limit + "x", id="big")
    assert await queue.status("big") is None
    assert (await queue.stats()).enqueued == 1
    with pytest.raises(trioqueue.ConfigurationError, match="max_payload=0"):
        Queue(backend, max_payload=0)


def test_the_default_payload_limit_is_one_mebibyte():
    prepare({"k": "x" * ((1 << 20) - 8)}, "fits")  # exactly 1 MiB as JSON
    with pytest.raises(ValueError, match="1,048,577 bytes"):
        prepare({"k": "x" * ((1 << 20) - 7)}, "big")


@pytest.mark.parametrize(
    ("job_id", "error", "match"),
    [(7, TypeError, "must be a str"), ("", ValueError, "1 to 256"), ("x" * 257, ValueError, "256")],
)
@pytest.mark.server_clock
async def test_a_bad_id_is_refused(make_backend, job_id, error, match):
    queue = Queue(await make_backend())
    with pytest.raises(error, match=match):
        await queue.enqueue({}, id=job_id)
    assert (await queue.stats()).enqueued == 0


@pytest.mark.server_clock
async def test_a_finished_job_is_deduplicated_until_its_record_is_evicted(make_backend):
    backend = await make_backend(retention=1)
    queue = Queue(backend)
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen)):
        await queue.enqueue("a", id="a")
    assert (await queue.enqueue("a", id="a")).deduplicated  # completed, still retained
    async with trioqueue.open_worker_pool(backend, collect(seen)):
        await queue.enqueue("b", id="b")  # finishing b evicts a (retention 1)
    assert await queue.status("a") is None
    assert not (await queue.enqueue("a", id="a")).deduplicated  # accepted anew


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_a_receipt_says_what_state_the_job_is_in(make_backend, autojump_clock):
    queue = Queue(await make_backend())
    fresh = await queue.enqueue("a", id="a")
    assert (fresh.state, fresh.queued, fresh.deduplicated) == (JobState.RECEIVED, True, False)
    later = await queue.enqueue("b", id="b", delay=60)
    assert (later.state, later.scheduled, later.queued) == (JobState.SCHEDULED, True, False)
    again = await queue.enqueue("b", id="b", delay=60)
    assert (again.state, again.deduplicated) == (JobState.SCHEDULED, True)
    running, release = trio.Event(), trio.Event()

    async def handler(job: trioqueue.Job) -> str:
        if job.id == "h":
            running.set()
            await release.wait()
        return job.id

    async with trioqueue.open_worker_pool(queue.backend, handler):
        await queue.enqueue("h", id="h")
        await running.wait()
        held = await queue.enqueue("h", id="h")
        assert (held.state, held.queued, held.deduplicated) == (JobState.PROCESSING, False, True)
        release.set()
        assert await queue.result("h") == "h"
        assert await queue.result("a") == "a"
        finished = await queue.enqueue("a", id="a")
        assert (finished.state, finished.queued) == (JobState.COMPLETED, False)
        await queue.cancel("b")
    cancelled = await queue.enqueue("b", id="b", delay=60)
    assert (cancelled.state, cancelled.deduplicated) == (JobState.CANCELLED, True)
