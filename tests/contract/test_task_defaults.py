"""Per-task defaults (`Task`): attempts, timeout and priority, and sync handlers in a thread."""

from __future__ import annotations

import threading
import time

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue, Task


async def _fails(job: trioqueue.Job) -> None:
    raise RuntimeError("always")


async def _sleeps(job: trioqueue.Job) -> None:
    await trio.sleep(60)


@pytest.mark.server_clock
async def test_a_tasks_max_attempts_comes_between_the_jobs_own_and_the_pools(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="task-default", task="flaky")
    await queue.enqueue(2, id="own", task="flaky", max_attempts=3)
    await queue.enqueue(3, id="pool-default", task="other")
    tasks = [Task("flaky", _fails, max_attempts=2), Task("other", _fails)]
    retry = trioqueue.RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.01)
    async with trioqueue.open_worker_pool(backend, tasks, retry=retry):
        pass
    attempts = {record.id: record.attempts for record in await backend.dead_letters()}
    assert attempts == {"task-default": 2, "own": 3, "pool-default": 4}


async def test_a_tasks_handler_timeout_comes_between_the_jobs_own_and_the_pools(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="task-default", task="slow", max_attempts=1)
    await queue.enqueue(2, id="own", task="slow", max_attempts=1, handler_timeout=7)
    await queue.enqueue(3, id="pool-default", task="plain", max_attempts=1)
    tasks = {"slow": Task("slow", _sleeps, handler_timeout=2), "plain": _sleeps}
    async with trioqueue.open_worker_pool(backend, tasks, handler_timeout=5):
        pass
    errors = {record.id: record.last_error for record in await backend.dead_letters()}
    messages = {job_id: error.message for job_id, error in errors.items() if error is not None}
    assert messages == {
        "task-default": "the handler ran longer than handler_timeout=2s",
        "own": "the handler ran longer than handler_timeout=7.0s",
        "pool-default": "the handler ran longer than handler_timeout=5s",
    }


@pytest.mark.not_on_stream  # a stream has no levels (test_priority.py)
@pytest.mark.server_clock
async def test_enqueue_with_a_task_takes_its_name_and_its_priority(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    seen: dict[str, tuple[str | None, int]] = {}

    async def note(job: trioqueue.Job) -> None:
        seen[job.id] = (job.task, job.priority)

    urgent = Task("page", note, priority=2)
    await queue.enqueue(1, id="default", task=urgent)
    await queue.enqueue(2, id="own", task=urgent, priority=-1)
    results = await queue.enqueue_many([3], ids=["many"], task=urgent)
    assert isinstance(results[0], trioqueue.Receipt)
    await queue.submit(4, id="plain", task=Task("plain", note))
    async with trioqueue.open_worker_pool(backend, note):
        pass
    assert seen == {
        "default": ("page", 2),
        "own": ("page", -1),
        "many": ("page", 2),
        "plain": ("plain", 0),
    }


@pytest.mark.server_clock
async def test_a_single_task_is_the_pools_handler_with_its_defaults(make_backend, autojump_clock):
    backend = await make_backend()
    await Queue(backend).enqueue(1, id="j")
    retry = trioqueue.RetryPolicy(base_delay=0.01, max_delay=0.01)
    async with trioqueue.open_worker_pool(
        backend, Task("any", _fails, max_attempts=1), retry=retry
    ):
        pass
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.FAILED, 1)


@pytest.mark.server_clock
async def test_a_sync_handler_runs_in_a_thread_when_asked(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    threads: list[bool] = []

    def resize(job: trioqueue.Job) -> dict[str, int]:
        threads.append(threading.current_thread() is threading.main_thread())
        threads.append(trioqueue.current_backend() is backend)  # the task's context
        time.sleep(0.01)  # blocking work: the event loop goes on meanwhile
        return {"width": job.payload["width"] // 2}

    await queue.enqueue({"width": 640}, id="r1", task="resize")
    async with trioqueue.open_worker_pool(backend, [Task("resize", resize, run_sync=True)]):
        pass
    assert threads == [False, True]
    assert await queue.result("r1") == {"width": 320}


async def test_a_sync_handler_is_cancelled_where_it_checks(make_backend, autojump_clock):
    """A timeout reaches a thread when it calls `trio.from_thread.check_cancelled`."""
    backend = await make_backend()
    checks: list[int] = []

    def crunch(job: trioqueue.Job) -> None:
        while True:
            checks.append(1)
            trio.from_thread.check_cancelled()
            time.sleep(0.001)

    await Queue(backend).enqueue(1, id="c1", max_attempts=1)
    task = Task("crunch", crunch, run_sync=True, handler_timeout=3)
    async with trioqueue.open_worker_pool(backend, task):
        pass
    record = await backend.status("c1")
    assert record is not None
    assert record.state is JobState.FAILED
    assert record.last_error is not None
    assert "handler_timeout=3s" in record.last_error.message
    assert checks


@pytest.mark.server_clock
async def test_a_sync_handler_held_at_shutdown_goes_back_and_is_not_lost(make_backend):
    """On the real clock: a mock clock jumps ahead while Trio waits for a thread."""
    backend = await make_backend()
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def crunch(job: trioqueue.Job) -> None:
        trio.from_thread.run_sync(started.set, trio_token=token)
        while True:
            trio.from_thread.check_cancelled()
            time.sleep(0.001)

    await Queue(backend).enqueue(1, id="c1")
    async with trioqueue.open_worker_pool(backend, Task("crunch", crunch, run_sync=True)) as pool:
        await started.wait()
        report = await pool.shutdown(grace=0)
    assert report.cancelled == 1
    record = await backend.status("c1")
    assert record is not None
    if make_backend.redelivers:  # at least once: back on the queue, to run again
        assert (report.released, record.state) == (1, JobState.RECEIVED)
        assert await backend.pending() == 1
    else:  # at most once: it started, so it ends as a dead letter that says so
        assert record.state is JobState.FAILED


@pytest.mark.server_clock
async def test_task_is_also_a_decorator_named_after_the_function(make_backend, autojump_clock):
    @trioqueue.task(max_attempts=5, priority=1)
    async def send_email(job: trioqueue.Job) -> str:
        return "sent"

    assert isinstance(send_email, Task)
    assert (send_email.name, send_email.max_attempts, send_email.priority) == ("send_email", 5, 1)

    @trioqueue.task(name="thumb", run_sync=True)
    def make_thumbnail(job: trioqueue.Job) -> None:
        pass

    assert (make_thumbnail.name, make_thumbnail.run_sync) == ("thumb", True)
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="e1", task="send_email")
    async with trioqueue.open_worker_pool(backend, [send_email, make_thumbnail]):
        pass
    assert await queue.result("e1") == "sent"


def _plain(job: trioqueue.Job) -> None:
    pass


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: Task("p", _plain), TypeError, "run_sync=True"),
        (lambda: Task("s", _sleeps, run_sync=True), TypeError, "an async function runs"),
        (lambda: Task("", _sleeps), ValueError, "1 to 200"),
        (lambda: Task(None, _sleeps), TypeError, "the task's name"),  # type: ignore[arg-type]
        (lambda: Task("t", _sleeps, max_attempts=0), ValueError, "at least one attempt"),
        (lambda: Task("t", _sleeps, handler_timeout=-1), ValueError, "more than 0"),
        (lambda: Task("t", _sleeps, priority=5), ValueError, "from -2"),
        (lambda: Task("t", "not callable"), TypeError, "not callable"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_task_is_refused_when_made(make, error, words):
    with pytest.raises(error, match=words):
        make()


@pytest.mark.server_clock
async def test_a_pool_refuses_a_table_whose_names_disagree(make_backend):
    backend = await make_backend()
    with pytest.raises(trioqueue.ConfigurationError, match="'send' is filed under 'mail'"):
        async with trioqueue.open_worker_pool(backend, {"mail": Task("send", _sleeps)}):
            pass
    with pytest.raises(TypeError, match="must be an async function"):
        async with trioqueue.open_worker_pool(backend, "send"):  # type: ignore[arg-type]
            pass
    twice = [Task("send", _sleeps), Task("send", _fails)]
    with pytest.raises(trioqueue.ConfigurationError, match="two tasks named 'send'"):
        async with trioqueue.open_worker_pool(backend, twice):
            pass
