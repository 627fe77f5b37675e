"""One reader of a queue's events stream per backend, run by whichever waiter needs it.

A job that someone waits for puts its id on the queue's events stream when it
finishes (``lua/prelude/3-claims.lua``'s ``ended``). `RedisBackend.finished` calls wait
here. One of them at a time reads the stream, in its own task, for all of them:
it blocks on ``XREAD`` and hands each id to the waiters' inboxes (`Waiters`).
When it has what it waited for, or is cancelled, it stops reading and wakes the
others, one of which reads on from the same position. So a process holds one
blocking connection for all its waits, whatever their number, and needs no task
of its own.

The position is taken before a waiter marks its jobs (`ready`), so no event of
theirs comes before it. Events can still be missed (the stream keeps the newest
ten thousand, and a restarted Redis may lose some): a waiter that hears nothing
for a while looks at its jobs again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._waiters import Inbox, Waiters

__all__ = ["EventReader"]


@final
class EventReader:
    """Reads the events stream for every waiter of one backend, one waiter at a time.

    Args:
        waiters: The backend's waiters, told of every id read.
        read: ``read(after)`` returns the position after the entries it read past
            *after*, and their job ids; ``read("")`` gives the newest position.
        block: ``block(after, seconds)`` returns once an entry after *after* may
            be there, or *seconds* passed.
    """

    def __init__(
        self,
        waiters: Waiters,
        read: Callable[[str], Awaitable[tuple[str, list[str]]]],
        block: Callable[[str, float], Awaitable[None]],
    ) -> None:
        self._waiters = waiters
        self._read = read
        self._block = block
        self._position: str | None = None
        self._reading = False

    async def ready(self) -> None:
        """Know the position to read from; call before marking jobs as waited for."""
        if self._position is None:
            position, _ = await self._read("")
            if self._position is None:  # another waiter may have set it meanwhile
                self._position = position

    def idle(self) -> None:
        """Nobody waits any more: the next waiter reads from the newest position."""
        if not self._reading:
            self._position = None

    async def wait(self, inbox: Inbox, seconds: float) -> bool:
        """Wait until *inbox* has ids delivered; False when *seconds* passed first."""
        deadline = trio.current_time() + seconds
        while not inbox.delivered:
            left = deadline - trio.current_time()
            if left <= 0:
                return False
            if not self._reading:
                await self._lead(inbox, deadline)
                continue
            with trio.move_on_at(deadline):
                await inbox.wait()  # an id came, or the reader stopped: look again
        return True

    async def _lead(self, inbox: Inbox, deadline: float) -> None:
        """Read for everyone until *inbox* has ids, or *deadline*; then hand over."""
        self._reading = True
        try:
            await self.ready()
            while not inbox.delivered:
                assert self._position is not None
                position, ids = await self._read(self._position)
                self._position = position
                for job_id in ids:
                    self._waiters.notify(job_id)
                left = deadline - trio.current_time()
                if not ids and left > 0:
                    await self._block(position, left)
                elif not ids:
                    return
        finally:
            self._reading = False
            self._waiters.nudge_all()  # another waiter reads on, if any still waits
