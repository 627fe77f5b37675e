"""Results: a handler's return value kept on the record, and waits for jobs to finish."""

from __future__ import annotations

import logging

import outcome
import pytest
import trio

import trioqueue
from trioqueue import (
    Drop,
    JobDropped,
    JobFailed,
    JobNotFound,
    JobState,
    Queue,
    ResultNotStored,
    RetryPolicy,
)

ONCE = RetryPolicy(max_attempts=1)


async def echo(job: trioqueue.Job) -> object:
    """Returns what it was given, after the payload's "sleep" seconds if any."""
    payload = job.payload
    if isinstance(payload, dict):
        await trio.sleep(payload.get("sleep", 0))
        if payload.get("fail"):
            raise ValueError(f"asked to fail: {payload['fail']}")
        if payload.get("drop"):
            raise Drop(payload["drop"])
        return payload.get("value")
    return payload


@pytest.mark.server_clock
async def test_a_result_is_kept_on_the_record(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"value": {"total": 3, "items": [1, 2]}}, id="sum")
    await queue.enqueue({"value": None}, id="nothing")
    async with trioqueue.open_worker_pool(backend, echo):
        pass
    record = await queue.status("sum")
    assert record is not None
    assert record.state is JobState.COMPLETED
    assert (record.result, record.result_error) == ({"items": [1, 2], "total": 3}, None)
    nothing = await queue.status("nothing")
    assert nothing is not None
    assert (nothing.result, nothing.result_error) == (None, None)
    assert await queue.result("sum") == {"items": [1, 2], "total": 3}
    assert await queue.result("nothing") is None


async def test_result_waits_until_the_job_finishes(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"value": "done", "sleep": 3}, id="slow")
    got: list[object] = []

    async def wait() -> None:
        got.append(await queue.result("slow"))
        got.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(10)  # nobody runs it yet: the wait goes on
        assert got == []
        started = trio.current_time()
        async with trioqueue.open_worker_pool(backend, echo):
            pass
    assert got[0] == "done"
    # it returned once the job was done, not at some later look
    assert started + 3 <= got[1] < started + 3.5  # type: ignore[operator]


@pytest.mark.server_clock
async def test_a_dead_letter_raises_job_failed_with_its_last_error(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"fail": "disk full"}, id="bad")
    async with trioqueue.open_worker_pool(backend, echo, retry=ONCE):
        pass
    with pytest.raises(JobFailed) as caught:
        await queue.result("bad")
    error = caught.value
    assert error.job_id == "bad"
    assert error.record.state is JobState.FAILED
    assert error.record.last_error is not None
    assert error.record.last_error.type == "ValueError"
    assert "asked to fail: disk full" in error.record.last_error.message
    assert "raise ValueError" in error.record.last_error.traceback
    assert "ValueError: asked to fail: disk full" in str(error)
    assert "requeue" in str(error)  # what to do about it
    assert ".record.last_error" in str(error)  # where the traceback is
    assert isinstance(error, trioqueue.NoResult)


@pytest.mark.not_on_stream  # a stream source refuses after=
@pytest.mark.server_clock
async def test_a_follower_of_a_failed_job_raises_job_failed_naming_its_reason(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"fail": "disk full"}, id="bad")
    await queue.enqueue({"value": 1}, id="next", after=["bad"])
    async with trioqueue.open_worker_pool(backend, echo, retry=ONCE):
        pass
    with pytest.raises(JobFailed) as caught:
        await queue.result("next")
    error = caught.value
    assert error.record.last_error is None  # it never ran: the cause is its reason
    assert error.record.reason is not None
    message = str(error)
    assert error.record.reason in message
    assert ".record.reason" in message
    assert ".record.last_error" not in message
    assert "fix the cause" not in message  # nothing of its own to fix
    assert "requeue_dead" in message


@pytest.mark.server_clock
async def test_a_dropped_job_says_so(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"drop": "out of stock"}, id="gone")
    async with trioqueue.open_worker_pool(backend, echo):
        pass
    with pytest.raises(JobDropped, match="out of stock"):
        await queue.result("gone")


async def test_an_unknown_id_is_not_found_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    before = trio.current_time()
    with pytest.raises(JobNotFound, match="never enqueued, or its record was forgotten"):
        await queue.result("nobody")
    assert trio.current_time() == before


@pytest.mark.parametrize(
    ("value", "why"),
    [({1, 2}, "not JSON serializable"), ("x" * 100, "over the pool's max_result=50")],
    ids=["not-json", "too-large"],
)
@pytest.mark.server_clock
async def test_a_result_that_cannot_be_kept_completes_the_job_once(
    make_backend, autojump_clock, caplog, value, why
):
    backend = await make_backend()
    queue = Queue(backend)
    runs: list[int] = []

    async def handler(job: trioqueue.Job) -> object:
        runs.append(job.attempt)
        return value

    await queue.enqueue(1, id="odd")
    with caplog.at_level(logging.WARNING, logger="trioqueue.pool"):
        async with trioqueue.open_worker_pool(backend, handler, max_result=50):
            pass
    assert runs == [1]  # its work is done: never run again for want of a result
    record = await queue.status("odd")
    assert record is not None
    assert record.state is JobState.COMPLETED
    assert record.result is None
    assert record.result_error is not None
    assert why in record.result_error
    with pytest.raises(ResultNotStored, match="completed, but its result was not stored"):
        await queue.result("odd")
    assert any("its result is not stored" in r.getMessage() for r in caplog.records)


async def test_a_wait_is_cancellable_and_leaves_the_job_alone(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"value": 7}, id="later")
    with trio.move_on_after(6) as waited:  # past one look again (5 s) on Redis
        await queue.result("later")
    assert waited.cancelled_caught
    record = await queue.status("later")
    assert record is not None
    assert record.state is JobState.RECEIVED
    async with trioqueue.open_worker_pool(backend, echo):
        pass
    with trio.fail_after(1):
        assert await queue.result("later") == 7


async def test_results_come_as_the_jobs_finish(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"value": "done already"}, id="first")
    async with trioqueue.open_worker_pool(backend, echo):
        pass  # it finishes before the wait starts
    await queue.enqueue({"value": "c", "sleep": 3}, id="c2")
    await queue.enqueue({"value": "a", "sleep": 1}, id="a2")
    await queue.enqueue({"fail": "b", "sleep": 2}, id="b2")
    seen: list[tuple[str, object]] = []
    async with trio.open_nursery() as nursery:

        async def work() -> None:
            await trio.sleep(1)
            async with trioqueue.open_worker_pool(backend, echo, workers=3, retry=ONCE):
                pass

        nursery.start_soon(work)
        async with queue.results(["first", "c2", "nobody", "a2", "b2"]) as results:
            async for job_id, got in results:
                seen.append((job_id, got))
    ids = [job_id for job_id, _ in seen]
    assert sorted(ids[:2]) == ["first", "nobody"]  # known at once
    assert ids[2:] == ["a2", "b2", "c2"]  # then as they finish: 1, 2, 3 s in
    outcomes = dict(seen)
    assert outcomes["first"] == outcome.Value("done already")
    assert outcomes["a2"] == outcome.Value("a")
    assert outcomes["c2"] == outcome.Value("c")
    with pytest.raises(JobFailed, match="asked to fail: b"):
        outcomes["b2"].unwrap()
    with pytest.raises(JobNotFound):
        outcomes["nobody"].unwrap()


@pytest.mark.server_clock
async def test_leaving_results_early_stops_the_wait(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"value": 1}, id="one")
    async with trioqueue.open_worker_pool(backend, echo):
        pass
    await queue.enqueue({"value": 2}, id="never-run")
    with trio.fail_after(1):
        async with queue.results(["one", "never-run"]) as results:
            async for job_id, got in results:
                assert (job_id, got.unwrap()) == ("one", 1)
                break
    # and the backend still serves waits afterwards
    await queue.enqueue({"value": 3}, id="three")
    async with trioqueue.open_worker_pool(backend, echo):
        pass
    with trio.fail_after(1):
        assert await queue.result("three") == 3


async def test_enqueue_and_wait_runs_a_job_once_per_id(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    runs: list[str] = []

    async def double(job: trioqueue.Job) -> int:
        runs.append(job.id)
        await trio.sleep(0.5)
        return int(job.payload) * 2

    async with trioqueue.open_worker_pool(backend, double) as pool:
        assert await queue.enqueue_and_wait(21, id="req-1") == 42
        assert await queue.enqueue_and_wait(21, id="req-1") == 42  # a retried request
        assert await queue.enqueue_and_wait(5) == 10
        await pool.shutdown(1)
    assert runs.count("req-1") == 1
    assert len(runs) == 2


async def test_many_waits_at_once_each_get_their_own(make_backend, autojump_clock):
    """One process, many waiters: on Redis one of them at a time reads for all."""
    backend = await make_backend()
    queue = Queue(backend)
    ids = [f"j{n}" for n in range(30)]
    for n, job_id in enumerate(ids):
        await queue.enqueue({"value": n, "sleep": n % 4}, id=job_id)
    got: dict[str, object] = {}

    async def wait(job_id: str, waiter: int) -> None:
        got[f"{job_id}/{waiter}"] = await queue.result(job_id)

    async with trio.open_nursery() as nursery:
        for job_id in ids:
            for waiter in range(2):
                nursery.start_soon(wait, job_id, waiter)
        await trio.sleep(1)
        async with trioqueue.open_worker_pool(backend, echo, workers=10):
            pass
    assert got == {f"j{n}/{w}": n for n in range(30) for w in range(2)}


async def test_a_cancelled_waiter_leaves_the_others_waiting(make_backend, autojump_clock):
    """On Redis the first waiter reads for all: cancelled, it hands the reading over."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"value": "x"}, id="x")
    await queue.enqueue({"value": "y", "sleep": 2}, id="y")
    got: list[object] = []

    async with trio.open_nursery() as nursery:
        first = trio.CancelScope()

        async def wait_x() -> None:
            with first:
                got.append(await queue.result("x"))

        async def wait_y() -> None:
            got.append(await queue.result("y"))

        nursery.start_soon(wait_x)
        await trio.sleep(1)
        nursery.start_soon(wait_y)
        await trio.sleep(1)
        first.cancel()  # x's waiter, the first to wait, goes
        await trio.sleep(1)
        async with trioqueue.open_worker_pool(backend, echo):
            pass
    assert got == ["y"]


async def test_a_requeued_dead_letter_gives_its_new_result(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    broken = True

    async def flaky(job: trioqueue.Job) -> str:
        if broken:
            raise RuntimeError("not yet")
        return "fixed"

    await queue.enqueue("p", id="j")
    async with trioqueue.open_worker_pool(backend, flaky, retry=ONCE):
        pass
    with pytest.raises(JobFailed):
        await queue.result("j")
    broken = False
    await queue.requeue_dead("j")
    async with trio.open_nursery() as nursery:

        async def work() -> None:
            await trio.sleep(1)
            async with trioqueue.open_worker_pool(backend, flaky, retry=ONCE):
                pass

        nursery.start_soon(work)
        with trio.fail_after(10):
            assert await queue.result("j") == "fixed"
