"""Group commit: calls that arrive while a round trip is in flight share the next one.

There is no timer and no background task. The first caller sends its item at
once; callers that arrive while that round trip is in flight wait for it, and
then one of them sends everything that has gathered. A lone caller pays one
round trip, as without batching; under load, one round trip carries many items.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar, cast, final

import attrs
import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

__all__ = ["Batcher"]

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


@attrs.define(eq=False)  # by identity: two callers may send equal items
class _Entry(Generic[ItemT, ResultT]):
    item: ItemT
    done: bool = False
    result: ResultT | None = None
    error: BaseException | None = None


@final
class Batcher(Generic[ItemT, ResultT]):
    """Send items through *flush* in batches, one round trip in flight at a time.

    Args:
        flush: Sends a batch and returns one result per item, in order. If it
            raises, every item of the batch gets the exception. It runs
            shielded from cancellation (it works for every caller in the
            batch), so it must bound its own time.
        max_batch: Most items in one round trip.
    """

    def __init__(
        self, flush: Callable[[Sequence[ItemT]], Awaitable[Sequence[ResultT]]], max_batch: int
    ) -> None:
        self._flush = flush
        self._max_batch = max_batch
        self._waiting: list[_Entry[ItemT, ResultT]] = []
        self._in_flight: trio.Event | None = None

    async def submit(self, item: ItemT) -> ResultT:
        """Send *item* in the next batch and return its result.

        A Trio checkpoint. Cancelled before the item was sent, it raises
        `trio.Cancelled` and the item is never sent. Once sent (by this caller or
        by another, in a shared batch), the item takes effect, so the call waits
        for its result and returns it: a call that raises Cancelled sent
        nothing, and the cancellation is met at the caller's next checkpoint.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        entry: _Entry[ItemT, ResultT] = _Entry(item)
        self._waiting.append(entry)
        try:
            while not entry.done:
                if self._in_flight is None:
                    await self._send_batch()
                else:
                    await self._in_flight.wait()
        except BaseException as exc:
            if entry in self._waiting:
                self._waiting.remove(entry)  # never sent
                raise
            if not isinstance(exc, trio.Cancelled):
                raise
            with trio.CancelScope(shield=True):  # on its way: the flush bounds its time
                while not entry.done and self._in_flight is not None:
                    await self._in_flight.wait()
            if not entry.done:  # pragma: no cover - a sent entry's batch is in flight
                raise
        if entry.error is not None:
            raise entry.error
        return cast("ResultT", entry.result)

    async def _send_batch(self) -> None:
        batch = self._waiting[: self._max_batch]
        del self._waiting[: self._max_batch]
        if not batch:  # pragma: no cover - a caller's own entry is always waiting
            return
        self._in_flight = in_flight = trio.Event()
        try:
            with trio.CancelScope(shield=True):
                results = await self._flush([entry.item for entry in batch])
        except BaseException as exc:
            for entry in batch:
                entry.done, entry.error = True, exc
            raise
        else:
            for entry, result in zip(batch, results, strict=True):
                entry.done, entry.result = True, result
        finally:
            self._in_flight = None
            in_flight.set()
