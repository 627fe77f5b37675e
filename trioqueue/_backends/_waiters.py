"""Who waits for which jobs to finish: the bookkeeping behind `Backend.finished`.

Each ``finished`` call opens one `Inbox` for the ids it waits for. A backend that
sees a job finish (the memory backend at once; the Redis backend when it reads the
job's event) calls `Waiters.notify`, which wakes every inbox that waits for it.
No task of its own: the waiting calls do the work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Inbox", "Waiters"]


@final
class Inbox:
    """One ``finished`` call's wait: the ids still awaited, and those reported since."""

    def __init__(self, ids: Iterable[str]) -> None:
        self.waiting: set[str] = set(ids)
        """The ids not yet given to the caller."""
        self._arrived: list[str] = []
        self._event = trio.Event()

    @property
    def delivered(self) -> bool:
        """Whether ids were delivered since the last `take`."""
        return bool(self._arrived)

    def deliver(self, job_id: str) -> None:
        """Report that *job_id* may have finished; wakes `wait`."""
        self._arrived.append(job_id)
        self._event.set()

    def nudge(self) -> None:
        """Wake `wait` with nothing delivered (something else changed: look again)."""
        self._event.set()

    def take(self) -> list[str]:
        """The ids delivered since the last call, each once, in order."""
        taken, self._arrived = self._arrived, []
        return list(dict.fromkeys(taken))

    async def wait(self) -> None:
        """Wait until something was delivered or a nudge came since the last wait."""
        await self._event.wait()
        self._event = trio.Event()


@final
class Waiters:
    """Every open `Inbox` of one backend, by the job ids they wait for."""

    def __init__(self) -> None:
        self._by_id: dict[str, set[Inbox]] = {}
        self._open: set[Inbox] = set()

    def __bool__(self) -> bool:
        return bool(self._open)

    def open(self, ids: Iterable[str]) -> Inbox:
        """A new inbox waiting for *ids*; `close` it when done."""
        inbox = Inbox(ids)
        self._open.add(inbox)
        for job_id in inbox.waiting:
            self._by_id.setdefault(job_id, set()).add(inbox)
        return inbox

    def done(self, inbox: Inbox, job_id: str) -> None:
        """*inbox* has given *job_id* to its caller: it waits for it no more."""
        inbox.waiting.discard(job_id)
        inboxes = self._by_id.get(job_id)
        if inboxes is not None:
            inboxes.discard(inbox)
            if not inboxes:
                del self._by_id[job_id]

    def close(self, inbox: Inbox) -> None:
        """Forget *inbox* and everything it still waited for."""
        for job_id in list(inbox.waiting):
            self.done(inbox, job_id)
        self._open.discard(inbox)

    def notify(self, job_id: str) -> None:
        """*job_id* may have finished: tell every inbox that waits for it."""
        for inbox in self._by_id.get(job_id, ()):
            inbox.deliver(job_id)

    def nudge_all(self) -> None:
        """Wake every inbox (the task that read events for them all has stopped)."""
        for inbox in self._open:
            inbox.nudge()
