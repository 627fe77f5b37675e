"""Progress: a handler reports how far it got, and the job's record shows it."""

from __future__ import annotations

import threading

import pytest
import trio

import trioqueue
from trioqueue import Queue, Task


@pytest.mark.server_clock
async def test_a_handler_reports_progress_that_the_record_shows(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    halfway = trio.Event()
    go_on = trio.Event()

    async def handler(job: trioqueue.Job) -> str:
        assert await trioqueue.report_progress({"done": 50, "of": 100})
        halfway.set()
        await go_on.wait()
        assert await trioqueue.report_progress(1.0)
        return "ok"

    await queue.enqueue(1, id="p1")
    record = await queue.status("p1")
    assert record is not None
    assert record.progress is None  # nothing reported yet
    async with trioqueue.open_worker_pool(backend, handler):
        await halfway.wait()
        record = await queue.status("p1")
        assert record is not None
        assert record.progress == {"done": 50, "of": 100}
        go_on.set()
    record = await queue.status("p1")
    assert record is not None
    assert (record.state, record.progress) == (trioqueue.JobState.COMPLETED, 1.0)


@pytest.mark.server_clock
async def test_progress_from_a_thread_and_a_task_the_handler_started(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    token_holder: list[trio.lowlevel.TrioToken] = [trio.lowlevel.current_trio_token()]

    def crunch(job: trioqueue.Job) -> None:
        assert threading.current_thread() is not threading.main_thread()
        trio.from_thread.run(trioqueue.report_progress, "in a thread", trio_token=token_holder[0])

    async def fan_out(job: trioqueue.Job) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trioqueue.report_progress, "from a child task")

    await queue.enqueue(1, id="t", task="crunch")
    await queue.enqueue(2, id="c", task="fan_out")
    tasks = [Task("crunch", crunch, run_sync=True), Task("fan_out", fan_out)]
    async with trioqueue.open_worker_pool(backend, tasks):
        pass
    progress = {job_id: (await queue.status(job_id)).progress for job_id in ("t", "c")}  # type: ignore[union-attr]
    assert progress == {"t": "in a thread", "c": "from a child task"}


@pytest.mark.server_clock
async def test_progress_of_a_claim_no_longer_held_is_not_stored(make_backend, autojump_clock):
    backend = await make_backend()
    await Queue(backend).enqueue(1, id="gone")
    [claim] = await backend.claim(1, lease=30, block=0)
    await backend.ack(claim)
    assert not await backend.set_progress(claim, b'"late"')
    record = await backend.status("gone")
    assert record is not None
    assert record.progress is None


@pytest.mark.server_clock
async def test_report_progress_outside_a_handler_or_with_a_bad_value_says_why(
    make_backend, autojump_clock
):
    with pytest.raises(trioqueue.TrioqueueError, match="no worker pool runs this code"):
        await trioqueue.report_progress(0.5)
    backend = await make_backend()
    errors: list[Exception] = []

    async def handler(job: trioqueue.Job) -> None:
        for value in (object(), "x" * 70_000):
            try:
                await trioqueue.report_progress(value)
            except (TypeError, ValueError) as exc:
                errors.append(exc)

    await Queue(backend).enqueue(1, id="b")
    async with trioqueue.open_worker_pool(backend, handler):
        pass
    assert [type(exc) for exc in errors] == [TypeError, ValueError]
    assert "JSON" in str(errors[0])
    assert "65,536 bytes" in str(errors[1])
