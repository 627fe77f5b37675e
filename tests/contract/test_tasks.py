"""Several handlers in one pool, chosen by each job's task name (stored with the job)."""

from __future__ import annotations

import pytest

import trioqueue
from trioqueue import JobState, Queue


@pytest.mark.server_clock
async def test_each_job_runs_with_the_handler_its_task_names(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[tuple[str, str]] = []

    async def send_email(job: trioqueue.Job) -> None:
        ran.append(("send_email", job.id))

    async def resize(job: trioqueue.Job) -> None:
        ran.append(("resize", job.id))

    await queue.enqueue({"to": "a"}, id="e1", task="send_email")
    await queue.enqueue_many([1, 2], ids=["r1", "r2"], task="resize")
    handlers = {"send_email": send_email, "resize": resize}
    async with trioqueue.open_worker_pool(backend, handlers):
        pass
    assert sorted(ran) == [("resize", "r1"), ("resize", "r2"), ("send_email", "e1")]


@pytest.mark.server_clock
async def test_a_job_whose_task_the_pool_lacks_ends_as_a_dead_letter_naming_it(
    make_backend, autojump_clock
):
    """Retried like any failure (another worker of a rolling deploy may know it)."""
    backend = await make_backend()
    queue = Queue(backend)

    async def send_email(job: trioqueue.Job) -> None:
        pass

    await queue.enqueue(1, id="unknown", task="resize", max_attempts=2)
    await queue.enqueue(2, id="untagged", max_attempts=1)
    async with trioqueue.open_worker_pool(backend, {"send_email": send_email}):
        pass
    dead = {record.id: record for record in await backend.dead_letters()}
    assert sorted(dead) == ["unknown", "untagged"]
    unknown = dead["unknown"]
    assert (unknown.state, unknown.attempts) == (JobState.FAILED, 2)
    assert unknown.last_error is not None
    assert unknown.last_error.type == "trioqueue.UnknownTask"
    assert "names task 'resize'" in unknown.last_error.message
    assert "it has send_email" in unknown.last_error.message
    assert dead["untagged"].last_error is not None
    assert "has no task name" in dead["untagged"].last_error.message


@pytest.mark.server_clock
async def test_a_pool_with_one_handler_runs_every_task_and_sees_the_name(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    seen: list[str | None] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append(job.task)

    await queue.enqueue(1, task="a")
    await queue.submit(2)
    async with trioqueue.open_worker_pool(backend, handler):
        pass
    assert sorted(seen, key=str) == [None, "a"]


@pytest.mark.parametrize(
    ("task", "error", "words"),
    [("", ValueError, "1 to 200"), ("x" * 201, ValueError, "1 to 200"), (3, TypeError, "a str")],
)
@pytest.mark.server_clock
async def test_a_bad_task_name_is_refused_and_nothing_is_stored(make_backend, task, error, words):
    backend = await make_backend()
    with pytest.raises(error, match=words):
        await Queue(backend).enqueue(1, id="j", task=task)
    assert await backend.status("j") is None


@pytest.mark.server_clock
async def test_a_bad_handler_table_is_refused_when_the_pool_opens(make_backend):
    backend = await make_backend()

    def plain(job: trioqueue.Job) -> None:
        pass

    with pytest.raises(trioqueue.ConfigurationError, match="at least one handler"):
        async with trioqueue.open_worker_pool(backend, {}):
            pass
    with pytest.raises(TypeError, match="must be an async function"):
        async with trioqueue.open_worker_pool(backend, {"plain": plain}):  # type: ignore[dict-item]
            pass
