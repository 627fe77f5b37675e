"""Typed payloads: a `Task`'s *payload_type*, checked at enqueue, given typed to the handler."""

from __future__ import annotations

import dataclasses
import datetime
import sys
from typing import TypedDict

import attrs
import pytest

import trioqueue
from trioqueue import JobState, Queue, Task


@attrs.frozen
class Resize:
    url: str
    width: int
    due: datetime.datetime | None = None


@dataclasses.dataclass
class Ping:
    host: str


class Mail(TypedDict):
    to: str


async def _keep(job: trioqueue.Job) -> object:
    return repr(job.payload)


@pytest.mark.server_clock
async def test_a_payload_is_checked_at_enqueue_and_a_bad_one_stores_nothing(make_backend):
    backend = await make_backend()
    queue = Queue(backend)
    resize = Task("resize", _keep, payload_type=Resize)
    words = r"payload_type of task 'resize' \(Resize\): Expected `int`, got `str` - at `\$.width`"
    with pytest.raises(ValueError, match=words):
        await queue.enqueue({"url": "a.png", "width": "wide"}, id="bad", task=resize)
    with pytest.raises(ValueError, match="missing required field `width`"):
        await queue.try_enqueue({"url": "a.png"}, id="short", task=resize)
    with pytest.raises(ValueError, match=r"job 1 of the batch.*Expected `int`"):
        await queue.enqueue_many(
            [{"url": "a", "width": 1}, {"url": "b", "width": None}], task=resize
        )
    with pytest.raises(ValueError, match=r"Expected `int`, got `str` - at `\$.width`"):
        await queue.enqueue(Resize("a.png", "wide"), id="made", task=resize)  # type: ignore[arg-type]
    assert [await backend.status(job_id) for job_id in ("bad", "short", "made")] == [None] * 3
    assert await backend.pending() == 0


@pytest.mark.server_clock
async def test_the_handler_gets_the_payload_as_its_type(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    seen: list[object] = []

    async def resize(job: trioqueue.Job) -> None:
        seen.append(job.payload)

    async def ping(job: trioqueue.Job) -> None:
        seen.append(job.payload)

    due = datetime.datetime(2026, 12, 24, 18, tzinfo=datetime.UTC)
    tasks = [
        Task("resize", resize, payload_type=Resize),
        Task("ping", ping, payload_type=Ping),
        Task("mail", ping, payload_type=Mail),
    ]
    await queue.enqueue(Resize("a.png", 320, due), id="r1", task=tasks[0])  # an instance
    await queue.enqueue({"url": "b.png", "width": 64}, id="r2", task=tasks[0])  # its fields
    await queue.enqueue(Ping("example.com"), id="p1", task=tasks[1])
    await queue.enqueue({"to": "a@example.com"}, id="m1", task=tasks[2])
    async with trioqueue.open_worker_pool(backend, tasks):
        pass
    assert sorted(seen, key=repr) == sorted(
        [
            Resize("a.png", 320, due),
            Resize("b.png", 64),
            Ping("example.com"),
            {"to": "a@example.com"},
        ],
        key=repr,
    )
    record = await backend.status("r1")
    assert record is not None
    assert record.payload == {"url": "a.png", "width": 320, "due": "2026-12-24T18:00:00Z"}


@pytest.mark.server_clock
async def test_a_job_enqueued_by_name_that_does_not_fit_ends_as_a_dead_letter_saying_why(
    make_backend, autojump_clock
):
    """Not checked at enqueue (the producer named the task, not its type): the worker says."""
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[object] = []

    async def resize(job: trioqueue.Job) -> None:
        ran.append(job.payload)

    await queue.enqueue({"url": "a.png"}, id="r1", task="resize", max_attempts=2)
    async with trioqueue.open_worker_pool(backend, [Task("resize", resize, payload_type=Resize)]):
        pass
    record = await backend.status("r1")
    assert record is not None
    assert record.state is JobState.FAILED
    assert record.last_error is not None
    assert (
        "job r1's payload does not fit the payload_type of task 'resize' (Resize)"
        in record.last_error.message
    )
    assert "missing required field `width`" in record.last_error.message
    assert ran == []


def test_a_payload_type_the_checker_cannot_read_is_refused_when_the_task_is_made():
    with pytest.raises(TypeError, match=r"payload_type=.*cannot check"):
        Task("t", _keep, payload_type=object())  # type: ignore[arg-type]


def test_without_msgspec_a_payload_type_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "msgspec", None)  # as if it were not installed
    with pytest.raises(trioqueue.ConfigurationError, match=r"pip install 'trioqueue\[typed\]'"):
        Task("t", _keep, payload_type=Resize)
    assert Task("t", _keep).payload_type is None  # a task without one needs nothing


@pytest.mark.server_clock
async def test_dispatch_runs_each_task_with_its_typed_payload(make_backend, autojump_clock):
    """`dispatch` makes one handler of a table, for code that wraps handlers itself."""
    backend = await make_backend()
    queue = Queue(backend)
    seen: list[object] = []

    def ping(job: trioqueue.Job) -> None:  # run in a thread
        seen.append(job.payload)

    handler = trioqueue.dispatch([Task("ping", ping, run_sync=True, payload_type=Ping)])
    await queue.enqueue({"host": "example.com"}, id="p1", task="ping")
    await queue.enqueue({"host": "example.org"}, id="p2", task="other", max_attempts=1)
    async with trioqueue.open_worker_pool(backend, handler):
        pass
    assert seen == [Ping("example.com")]
    record = await backend.status("p2")
    assert record is not None
    assert record.last_error is not None
    assert record.last_error.type == "trioqueue.UnknownTask"
