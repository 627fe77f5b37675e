"""A ready queue with priority levels: the highest level first, FIFO within one."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Generic, TypeVar

from ..._payload import PRIORITIES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["ReadyLevels"]

T = TypeVar("T")


class ReadyLevels(Generic[T]):
    """Items waiting by level, one deque per level of `PRIORITIES`.

    *level* tells an item's level. Its length counts every level, so a capacity
    bounds them together.
    """

    def __init__(self, level: Callable[[T], int]) -> None:
        self._level = level
        self._levels = {priority: collections.deque[T]() for priority in PRIORITIES}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[T]:
        """The items in the order `pop` takes them."""
        for line in self._levels.values():
            yield from line

    def __contains__(self, item: T) -> bool:
        return item in self._levels[self._level(item)]

    def push(self, item: T, *, front: bool = False) -> None:
        """Add *item* at the back of its level, or next in line there when *front*."""
        line = self._levels[self._level(item)]
        (line.appendleft if front else line.append)(item)
        self._count += 1

    def pop(self) -> T:
        """Take the item first in line at the highest level that holds one.

        Raises:
            IndexError: No level holds one.
        """
        for line in self._levels.values():  # highest first
            if line:
                self._count -= 1
                return line.popleft()
        raise IndexError("pop from empty ReadyLevels")

    def remove(self, item: T) -> None:
        """Take *item* out of its level; ValueError if it is not there."""
        self._levels[self._level(item)].remove(item)
        self._count -= 1

    def depths(self) -> dict[int, int]:
        """How many items each level holds, highest level first."""
        return {priority: len(line) for priority, line in self._levels.items()}
