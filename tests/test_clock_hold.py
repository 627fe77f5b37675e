"""The contract suite's mock clock holds still while a Redis request is in flight."""

from __future__ import annotations

import time

import trio
import trio.testing

from .conftest import _hold_the_clock


class SlowConnection:
    """Requests that take 0.1 s of real time, as a reply on a loaded machine does."""

    async def run(self, *args: object) -> None:
        await trio.to_thread.run_sync(time.sleep, 0.1)

    hash = hashes = list_items = exists = unblock = wait_replicas = run


async def test_no_jump_while_a_request_is_in_flight():
    clock = trio.testing.MockClock(autojump_threshold=0.02)
    connection = SlowConnection()
    _hold_the_clock(connection)

    async def main() -> list[float]:
        seen: list[float] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep, 5)  # a deadline the clock could jump to
            for _ in range(3):
                await connection.run()
                seen.append(trio.current_time())
        return seen

    # in a run of its own, on the mock clock (this test's own run is on the real one)
    seen = await trio.to_thread.run_sync(lambda: trio.run(main, clock=clock))
    assert seen == [0, 0, 0]
    assert clock.autojump_threshold == 0.02  # set back once the last request returned


async def test_without_the_hold_the_clock_jumps_during_a_slow_reply():
    clock = trio.testing.MockClock(autojump_threshold=0.02)
    connection = SlowConnection()

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep, 5)
            await connection.run()
            return trio.current_time()

    assert await trio.to_thread.run_sync(lambda: trio.run(main, clock=clock)) == 5
