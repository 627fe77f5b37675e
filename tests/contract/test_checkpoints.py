"""Every call a producer makes is a Trio checkpoint, on every backend.

In a scope cancelled before the call, it raises `trio.Cancelled` and changes
nothing: as Trio's own calls behave, so that a loop of enqueues under
``trio.move_on_after`` stops at its deadline, whatever the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..conftest import MakeBackend

CALLS: dict[str, Callable[[Queue], Awaitable[Any]]] = {
    "enqueue": lambda queue: queue.enqueue("new", id="new"),
    "enqueue_many": lambda queue: queue.enqueue_many(["new"], ids=["new"]),
    "enqueue_and_wait": lambda queue: queue.enqueue_and_wait("new", id="new"),
    "cancel": lambda queue: queue.cancel("waiting"),
    "status": lambda queue: queue.status("waiting"),
    "stats": lambda queue: queue.stats(),
    "result": lambda queue: queue.result("waiting"),
}
FULL_QUEUE_CALLS: dict[str, Callable[[Queue], Awaitable[Any]]] = {
    "try_enqueue": lambda queue: queue.try_enqueue("new", id="new"),
    "submit": lambda queue: queue.submit("new", id="new"),
    "try_enqueue_many": lambda queue: queue.try_enqueue_many(["new"], ids=["new"]),
    "submit_many": lambda queue: queue.submit_many(["new"], ids=["new"]),
    "requeue_dead": lambda queue: queue.requeue_dead("dead"),
    "purge_dead": lambda queue: queue.purge_dead(),
    "dead_letters": lambda queue: queue.dead_letters(),
}


async def a_queue_with_a_waiting_job_and_a_dead_letter(backend: trioqueue.Backend) -> Queue:
    queue = Queue(backend)

    async def fail(job: trioqueue.Job) -> None:
        raise RuntimeError("to the dead letters")

    retry = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.open_worker_pool(backend, fail, retry=retry):
        await queue.enqueue("dead", id="dead")
    await queue.enqueue("waiting", id="waiting")
    return queue


async def assert_cancelled_before_it_changed_anything(queue: Queue, call: str) -> None:
    before = await queue.stats()
    with trio.CancelScope() as scope:
        scope.cancel()
        await (CALLS | FULL_QUEUE_CALLS)[call](queue)
    assert scope.cancelled_caught, f"{call} in a cancelled scope did not raise Cancelled"
    assert await queue.status("new") is None
    waiting, dead = await queue.status("waiting"), await queue.status("dead")
    assert waiting is not None
    assert waiting.state is not JobState.CANCELLED
    assert dead is not None
    assert dead.state is JobState.FAILED
    after = await queue.stats()
    assert (after.enqueued, after.cancelled, after.gauges) == (
        before.enqueued,
        before.cancelled,
        before.gauges,
    )


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.server_clock
async def test_a_call_in_a_cancelled_scope_raises_cancelled_and_changes_nothing(
    make_backend: MakeBackend, autojump_clock: trio.testing.MockClock, call: str
):
    queue = await a_queue_with_a_waiting_job_and_a_dead_letter(await make_backend())
    await assert_cancelled_before_it_changed_anything(queue, call)


@pytest.mark.not_on_stream
@pytest.mark.parametrize("call", FULL_QUEUE_CALLS)
@pytest.mark.server_clock
async def test_the_other_calls_in_a_cancelled_scope_raise_cancelled_and_change_nothing(
    make_backend: MakeBackend, autojump_clock: trio.testing.MockClock, call: str
):
    queue = await a_queue_with_a_waiting_job_and_a_dead_letter(await make_backend())
    await assert_cancelled_before_it_changed_anything(queue, call)


WORKER_CALLS: dict[str, Callable[[trioqueue.Backend, trioqueue.Claim], Awaitable[Any]]] = {
    "ack": lambda backend, claim: backend.ack(claim),
    "retry_later": lambda backend, claim: backend.retry_later(claim, None, delay=5),
    "dead_letter": lambda backend, claim: backend.dead_letter(claim, None, "test"),
    "drop": lambda backend, claim: backend.drop(claim, "test"),
    "cancel_claim": lambda backend, claim: backend.cancel_claim(claim),
    "renew": lambda backend, claim: backend.renew([claim], lease=backend.default_lease),
    "release": lambda backend, claim: backend.release([claim]),
    "requeue": lambda backend, claim: backend.requeue(claim),  # after a retry_later
    "renew nothing": lambda backend, claim: backend.renew([], lease=backend.default_lease),
    "release nothing": lambda backend, claim: backend.release([]),
    "add nothing": lambda backend, claim: backend.add_many([], trioqueue.AddMode.NOWAIT),
}


@pytest.mark.parametrize("call", WORKER_CALLS)
@pytest.mark.server_clock
async def test_a_worker_s_call_in_a_cancelled_scope_raises_cancelled_and_changes_nothing(
    make_backend: MakeBackend, autojump_clock: trio.testing.MockClock, call: str
):
    """A pool's calls too: cancelled before they change anything, the claim holds as it was."""
    backend = await make_backend()
    await Queue(backend).enqueue("work", id="work")
    (claim,) = await backend.claim(1, lease=backend.default_lease, block=1)
    if call == "requeue":
        assert await backend.retry_later(claim, None, delay=0)
    before = await backend.status("work")
    assert before is not None
    with trio.CancelScope() as scope:
        scope.cancel()
        await WORKER_CALLS[call](backend, claim)
    assert scope.cancelled_caught, f"{call} in a cancelled scope did not raise Cancelled"
    after = await backend.status("work")
    assert after is not None
    assert (after.state, after.attempts) == (before.state, before.attempts)
    # the claim still holds: nothing gave it up
    assert await (backend.requeue(claim) if call == "requeue" else backend.ack(claim))
