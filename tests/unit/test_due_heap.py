"""The memory backend's schedule of due times (`DueHeap`), against a plain model."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from trioqueue._backends.memory._due import DueHeap


class Item:
    """An item compared by identity, as the backend's entries are."""

    def __init__(self, name: int) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Item({self.name})"


operations = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 5)),
        st.tuples(st.just("pop"), st.integers(0, 5)),
        st.tuples(st.just("remove"), st.integers(0, 20)),
        st.tuples(st.just("hurry"), st.integers(0, 20)),
    ),
    max_size=40,
)


@given(operations)
def test_items_come_out_by_due_time_then_arrival_with_the_latest_hurried_first(ops):
    heap = DueHeap[Item]()
    # the model: (due, rank, item); a hurried item ranks below every arrival, and
    # below the ones hurried before it
    model: list[tuple[float, int, Item]] = []
    items: list[Item] = []
    arrivals = 0
    for op, value in ops:
        if op == "push":
            item = Item(len(items))
            items.append(item)
            first = heap.push(item, float(value))
            model.append((float(value), arrivals, item))
            arrivals += 1
            assert first == (min(model, key=lambda m: m[:2])[2] is item)
        elif op == "pop":
            taken = heap.pop_due(float(value))
            first = min(model, key=lambda m: m[:2], default=None)
            if first is None or first[0] > value:  # none is due yet
                assert taken is None
            else:
                assert taken == (first[0], first[2])
                model.remove(first)
        elif items:
            item = items[value % len(items)]
            held = [m for m in model if m[2] is item]
            if op == "remove":
                heap.remove(item)
                model = [m for m in model if m[2] is not item]
            elif held:  # hurry, at the time 2.5
                first = min(2.5, min(m[0] for m in model))
                heap.hurry(item, 2.5)
                model = [m for m in model if m[2] is not item]
                model.append((first, -(10**18) - arrivals, item))  # ints: exact
                arrivals += 1
        assert len(heap) == len(model)
        assert heap.next_due() == min((m[0] for m in model), default=math.inf)
        assert list(heap) == [m[2] for m in sorted(model, key=lambda m: m[:2])]
        assert all((m[2] in heap) for m in model)
