"""A watch over one connection's requests: one without a reply for a while asks if Redis is up.

valkey-glide holds a request sent while it reconnects until the server is back
instead of failing it (a ``SET`` sent just after the server died returned 1.6 s
later). A pool would then neither see the outage nor know that its lease
renewals and outcomes wait, while another pool's sweeper recovers its claims.
So every request runs in a cancel scope the watch knows of, and one task per
connection looks every `_EVERY` seconds: when a request has waited `_LATE`
seconds or more, it asks the probe whether Redis is up, and if it is not, it
cancels every late request, which then raises what the probe found. A request
whose reply never came may or may not have run, as with any lost reply.

The task is a Trio system task, so that a backend needs no nursery of its own
(it is opened with ``async with`` wherever the user likes); it catches and logs
everything, as a system task must. A per-request task cost a pool 15% of its
jobs per second.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, TypeVar, final

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..._exceptions import BackendUnavailable

__all__ = ["LivenessWatch"]

logger = logging.getLogger("trioqueue.redis")

_LATE: Final = 1.0  # seconds without a reply before the probe asks whether Redis is up
_EVERY: Final = 0.25  # seconds between looks: a late request is noticed within 1.25 s

T = TypeVar("T")


@final
class _Request:
    __slots__ = ("scope", "started")

    def __init__(self) -> None:
        self.started = trio.current_time()
        self.scope = trio.CancelScope()


@final
class LivenessWatch:
    """Cancels the requests that wait on a Redis the probe finds down (see the module).

    Args:
        is_down: Whether Redis is down now, asked afresh each time (a probe).
        finding: What the last probe found, as a new exception for each caller
            given up (one instance raised in many tasks would gather their tracebacks).
    """

    def __init__(
        self,
        is_down: Callable[[], Awaitable[bool]],
        finding: Callable[[], BackendUnavailable],
    ) -> None:
        self._is_down = is_down
        self._finding = finding
        self._requests: set[_Request] = set()
        self._task_scope: trio.CancelScope | None = None

    def start(self) -> None:
        """Start the watching task (in Trio's system nursery); once per `stop`."""
        if self._task_scope is None:
            self._task_scope = trio.CancelScope()
            trio.lowlevel.spawn_system_task(self._watch, self._task_scope, name=repr(self))

    def stop(self) -> None:
        """End the watching task; requests made afterwards are not watched."""
        if self._task_scope is not None:
            self._task_scope.cancel()
            self._task_scope = None

    async def call(self, request: Callable[[], Awaitable[T]]) -> T:
        """*request*'s reply; `BackendUnavailable` if Redis is found down while it waits.

        Raises:
            BackendUnavailable: What the probe found, when the request was given up.
        """
        watched = _Request()
        self._requests.add(watched)
        try:
            with watched.scope:
                return await request()
        finally:
            self._requests.discard(watched)
        raise self._finding()  # only the watch cancels this scope

    async def _watch(self, task_scope: trio.CancelScope) -> None:
        with task_scope:
            while True:
                await trio.sleep(_EVERY)
                try:
                    await self._look()
                except Exception:  # a system task must not raise: say so, go on watching
                    logger.exception("the Redis liveness watch failed; it goes on")

    async def _look(self) -> None:
        now = trio.current_time()
        late = [request for request in self._requests if now - request.started >= _LATE]
        if not late:
            return
        if await self._is_down():
            for request in late:
                request.scope.cancel()  # no matter if answered meanwhile: then it has left
