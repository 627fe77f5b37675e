"""Run one Trio loop on a mock clock in a thread, and drive it from synchronous code.

Hypothesis' `RuleBasedStateMachine` is synchronous, and its steps must share one
living pool. This helper keeps a Trio run going between steps; time moves only
when a step jumps the clock (or asks for autojump while it waits).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import trio
import trio.testing

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")

STEP_TIME_LIMIT = 60.0  # real seconds one step may take before it fails, not hangs


class TrioThread:
    def __init__(self, cushion: float = 0.0) -> None:
        # real seconds every task must stay blocked to count as settled, and before an
        # autojumping step lets the clock jump
        self.cushion = cushion
        self.clock = trio.testing.MockClock()
        self.clock.autojump_threshold = math.inf
        self._started = threading.Event()
        self._stop: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        self._started.wait()

    def _main(self) -> None:
        try:
            trio.run(self._serve, clock=self.clock)
        except BaseException as exc:
            self._error = exc
            self._started.set()

    async def _serve(self) -> None:
        self._stop = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._started.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    @property
    def nursery(self) -> trio.Nursery:
        assert self._nursery is not None
        return self._nursery

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, settle: bool = True) -> T:
        """Run *fn* in the loop, then (unless told not to) let every task settle."""

        async def step() -> T:
            with trio.CancelScope() as scope:
                # a timer thread cancels a step that outlives the limit (real time: the
                # loop's clock is a mock one)
                timer = threading.Timer(
                    STEP_TIME_LIMIT,
                    trio.from_thread.run_sync,
                    (scope.cancel,),
                    {"trio_token": self._token},
                )
                timer.start()
                try:
                    result = await fn(*args)
                    if settle:
                        await trio.testing.wait_all_tasks_blocked(cushion=self.cushion)
                    return result
                finally:
                    timer.cancel()
            raise TimeoutError(
                f"a step ({getattr(fn, '__name__', fn)}) ran for {STEP_TIME_LIMIT:.0f} s of "
                "real time: something waits for ever"
            )

        return trio.from_thread.run(step, trio_token=self._token)

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout=30)
        if self._error is not None:
            raise self._error
