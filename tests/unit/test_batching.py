"""The group commit that batches Redis outcomes: no timer, one round trip in flight."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from trioqueue._backends.redis._batching import Batcher

if TYPE_CHECKING:
    from collections.abc import Sequence


class Server:
    """A flush that records each batch and holds it until the test lets it go."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = trio.Event()
        self.fail_with: Exception | None = None

    async def flush(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return [item * 10 for item in items]


async def test_a_lone_caller_is_sent_at_once():
    server = Server()
    server.gate.set()
    batcher = Batcher(server.flush, max_batch=8)
    assert await batcher.submit(1) == 10
    assert await batcher.submit(2) == 20
    assert server.batches == [[1], [2]]


async def test_callers_that_arrive_during_a_round_trip_share_the_next():
    server = Server()
    batcher = Batcher(server.flush, max_batch=100)
    results: dict[int, int] = {}

    async def call(item: int) -> None:
        results[item] = await batcher.submit(item)

    async with trio.open_nursery() as nursery:
        for item in range(6):
            nursery.start_soon(call, item)
        await trio.testing.wait_all_tasks_blocked()
        server.gate.set()
    assert [len(batch) for batch in server.batches] == [1, 5]
    assert results == {item: item * 10 for item in range(6)}


async def test_a_batch_never_exceeds_max_batch():
    server = Server()
    batcher = Batcher(server.flush, max_batch=3)
    async with trio.open_nursery() as nursery:
        for item in range(10):
            nursery.start_soon(batcher.submit, item)
        await trio.testing.wait_all_tasks_blocked()
        server.gate.set()
    assert [len(batch) for batch in server.batches] == [1, 3, 3, 3]
    assert sorted(item for batch in server.batches for item in batch) == list(range(10))


async def test_a_failed_round_trip_fails_every_item_in_it():
    server = Server()
    server.fail_with = ConnectionError("gone")
    batcher = Batcher(server.flush, max_batch=8)
    errors: list[BaseException] = []

    async def call(item: int) -> None:
        try:
            await batcher.submit(item)
        except ConnectionError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for item in range(4):
            nursery.start_soon(call, item)
        await trio.testing.wait_all_tasks_blocked()
        server.gate.set()
    assert len(errors) == 4
    assert all(exc is server.fail_with for exc in errors)


async def test_an_item_cancelled_before_it_was_sent_is_never_sent():
    server = Server()
    batcher = Batcher(server.flush, max_batch=8)
    waiter = trio.CancelScope()

    async def waits_then_is_cancelled() -> None:
        with waiter:
            await batcher.submit(2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(batcher.submit, 1)  # in flight, held at the gate
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waits_then_is_cancelled)
        await trio.testing.wait_all_tasks_blocked()
        waiter.cancel()
        await trio.testing.wait_all_tasks_blocked()
        server.gate.set()
    assert waiter.cancelled_caught
    assert server.batches == [[1]]


async def test_a_sent_batch_finishes_even_if_its_sender_is_cancelled():
    server = Server()
    batcher = Batcher(server.flush, max_batch=8)
    sender = trio.CancelScope()
    outcome: list[str] = []

    async def send() -> None:
        with sender:
            await batcher.submit(7)
            outcome.append("returned")
        if sender.cancelled_caught:
            outcome.append("cancelled")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()
        sender.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert server.batches == [[7]]
        assert outcome == []  # still in flight: the round trip is shielded
        server.gate.set()
    assert outcome == ["returned"]  # the shielded round trip ended: its result stands
    assert await batcher.submit(8) == 80  # nothing is stuck


async def test_a_call_in_a_cancelled_scope_raises_and_sends_nothing():
    server = Server()
    server.gate.set()
    batcher = Batcher(server.flush, max_batch=8)
    with trio.CancelScope() as scope:
        scope.cancel()
        await batcher.submit(1)
    assert scope.cancelled_caught
    assert server.batches == []


async def test_an_item_sent_in_another_callers_batch_returns_its_result_when_cancelled():
    """Cancelled once its item is on its way, a caller waits for the result and returns it:
    a call that raises Cancelled has sent nothing.

    Who sends the second batch is up to Trio's scheduler (it reverses a batch of
    woken tasks at random); the rule holds either way, and the case where another
    caller sends the rider's item comes up within a few tries.
    """
    rounds = [await _cancel_a_rider() for _ in range(20)]
    assert any(rounds)


async def _cancel_a_rider() -> bool:
    """Cancel a caller whose item is in the batch in flight; whether another sent it."""
    batches: list[list[int]] = []
    senders: list[trio.lowlevel.Task] = []
    gates = [trio.Event(), trio.Event()]  # each batch is held until its gate opens

    async def flush(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        senders.append(trio.lowlevel.current_task())
        await gates[len(batches) - 1].wait()
        return [item * 10 for item in items]

    batcher = Batcher(flush, max_batch=8)
    rider = trio.CancelScope()
    outcome: list[object] = []
    riders: list[trio.lowlevel.Task] = []

    async def ride() -> None:
        riders.append(trio.lowlevel.current_task())
        with rider:
            outcome.append(await batcher.submit(2))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(batcher.submit, 1)  # batch [1] in flight
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(batcher.submit, 3)  # 3 and 2 wait for the next batch
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ride)
        await trio.testing.wait_all_tasks_blocked()
        gates[0].set()
        await trio.testing.wait_all_tasks_blocked()
        assert batches == [[1], [3, 2]]  # 2 is on its way
        rider.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert outcome == []  # it waits for its result, shielded
        gates[1].set()
    assert outcome == [20]
    assert not rider.cancelled_caught
    return senders[1] is not riders[0]


@pytest.mark.parametrize("max_batch", [1, 2])
async def test_every_caller_gets_its_own_result(max_batch: int):
    server = Server()
    server.gate.set()
    batcher = Batcher(server.flush, max_batch=max_batch)
    got: dict[int, int] = {}

    async def call(item: int) -> None:
        got[item] = await batcher.submit(item)

    async with trio.open_nursery() as nursery:
        for item in range(20):
            nursery.start_soon(call, item)
    assert got == {item: item * 10 for item in range(20)}


async def test_equal_items_from_two_callers_are_two_entries():
    server = Server()
    batcher = Batcher(server.flush, max_batch=8)
    waiter = trio.CancelScope()
    got: list[int] = []

    async def cancelled_one() -> None:
        with waiter:
            await batcher.submit(5)

    async def kept_one() -> None:
        got.append(await batcher.submit(5))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(batcher.submit, 1)  # in flight
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(kept_one)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(cancelled_one)
        await trio.testing.wait_all_tasks_blocked()
        waiter.cancel()  # must withdraw its own entry, not the equal one before it
        await trio.testing.wait_all_tasks_blocked()
        server.gate.set()
    assert server.batches == [[1], [5]]
    assert got == [50]
