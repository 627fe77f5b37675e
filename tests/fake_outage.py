"""A backend behind a fake outage: its calls fail within given windows of Trio's clock."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel

from trioqueue import BackendUnavailable

# every call the pool makes to its backend
CALLS = {
    "claim", "renew", "sweep", "pending", "ack", "retry_later", "drop", "dead_letter",
    "requeue", "release",
}  # fmt: skip


class Outages:
    """A backend whose calls raise `BackendUnavailable` within the given windows.

    Windows are ``(start, end)`` on Trio's clock; ``end`` may be ``math.inf``.
    Every call is recorded as ``(name, time, failed)``; `returned` holds when the
    successful ones returned.
    """

    def __init__(self, inner: Any, *windows: tuple[float, float], hang: bool = False) -> None:
        self.inner = inner
        self.windows = windows
        self.hang = hang  # a claim in an outage waits until cancelled instead of failing
        self.calls: list[tuple[str, float, bool]] = []
        self.returned: list[float] = []

    def down(self) -> bool:
        now = trio.current_time()
        return any(start <= now < end for start, end in self.windows)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in CALLS:
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            failed = self.down()
            self.calls.append((name, trio.current_time(), failed))
            if failed and name == "claim" and self.hang:
                await trio.sleep_forever()
            if failed:
                await trio.lowlevel.checkpoint()
                raise BackendUnavailable("fake://db", "connection refused")
            result = await attr(*args, **kwargs)
            self.returned.append(trio.current_time())
            return result

        return call

    def failures(self, name: str | None = None) -> list[float]:
        return [t for n, t, failed in self.calls if failed and name in (None, n)]
