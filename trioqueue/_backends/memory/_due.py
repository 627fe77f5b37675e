"""Items waiting for a due time: the earliest first, first come first at one time."""

from __future__ import annotations

import heapq
import itertools
import math
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["DueHeap"]

T = TypeVar("T")

_HURRIED: Final = 1 << 62  # an order below every arrival's (see hurry)


class DueHeap(Generic[T]):
    """Items by due time (any clock's seconds), each held once; compared by identity.

    Two items due at one time come out in the order they came; one `hurry`
    made due at once comes out before every other, the latest hurried first.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T]] = []  # (due, order, item)
        self._arrivals = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __contains__(self, item: T) -> bool:
        return any(held is item for _, _, held in self._heap)

    def __iter__(self) -> Iterator[T]:
        """The items in the order `pop_due` takes them."""
        return (item for _, _, item in sorted(self._heap, key=lambda entry: entry[:2]))

    def next_due(self) -> float:
        """When the first item is due; infinity when none is held."""
        return self._heap[0][0] if self._heap else math.inf

    def push(self, item: T, due: float) -> bool:
        """Hold *item* until *due*; return whether it is the first due now."""
        heapq.heappush(self._heap, (due, next(self._arrivals), item))
        return self._heap[0][2] is item

    def pop_due(self, now: float) -> tuple[float, T] | None:
        """Take the first item if it is due at *now*: its due time and itself; else None."""
        if not self._heap or self._heap[0][0] > now:
            return None
        due, _, item = heapq.heappop(self._heap)
        return due, item

    def remove(self, item: T) -> None:
        """Stop holding *item*, if held."""
        self._heap = [entry for entry in self._heap if entry[2] is not item]
        heapq.heapify(self._heap)

    def hurry(self, item: T, now: float) -> None:
        """Make *item*, held, due at *now* before every other (or when the first is, if sooner)."""
        first = min(now, self.next_due())
        order = -_HURRIED - next(self._arrivals)  # below every arrival, and every earlier hurry
        self._heap = [
            (first, order, held) if held is item else (due, rank, held)
            for due, rank, held in self._heap
        ]
        heapq.heapify(self._heap)
