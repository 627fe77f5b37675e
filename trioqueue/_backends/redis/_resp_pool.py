"""A pool of `RespStream` connections to one Redis server, safe under cancellation.

A `RespPool` lends one connection to each request. A request on a free room and
an idle connection yields to the scheduler once, while it waits for its reply:
no thread and no task sits between a request and its reply.

What a cancelled or timed-out request leaves behind is handled off the caller's
path. Its connection still owes the replies to what was sent, so it is not lent
again: a task of the pool's own reads those replies off and drops them, within
`DRAIN_TIMEOUT`, and only then lends the connection again (a cancellation storm
costs no new connections). A connection whose command was cut off half-sent, or
whose owed replies do not come in time, is closed. When one fails on a broken
stream, the idle ones are closed too: they most likely date from before the same
restart.

The pool is bounded: at most ``max_connections`` are open or being drained, and
requests beyond that wait in order (a Trio semaphore is first come, first
served) until their deadline, then fail saying so. Idle connections carry TCP
keepalive, are closed after `IDLE_LIMIT` seconds unused, and one idle for more
than a second is checked before it is lent (a server's ``timeout`` closing it
shows as readable end-of-file; over TLS, where the server may send a session
ticket at any time, only the idle limit and keepalive apply).
"""

from __future__ import annotations

import collections
import contextlib
import math
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ._resp import Arg, ConnectionLost, NoReply, ReplyError, RespStream, encode, open_stream

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from ._url_parts import UrlParts

__all__ = ["DRAIN_TIMEOUT", "IDLE_LIMIT", "MAX_CONNECTIONS", "RespPool"]

MAX_CONNECTIONS: Final = 64
"""Connections a pool keeps to one server at most, lent, idle or being drained."""

DRAIN_TIMEOUT: Final = 5.0
"""Seconds the pool waits for the replies a cancelled request's connection owes."""

IDLE_LIMIT: Final = 30.0
"""Seconds an idle connection is kept; older ones are closed when next seen."""

_CHECK_AFTER: Final = 1.0  # seconds idle after which a connection is checked before lending


def _first_cancelled(group: BaseExceptionGroup[BaseException]) -> trio.Cancelled | None:
    """The `trio.Cancelled` of a group that holds nothing else: raised bare, as Trio's calls do."""
    cancelled, rest = group.split(trio.Cancelled)
    if rest is not None or cancelled is None:
        return None
    leaf: BaseException = cancelled
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, trio.Cancelled)
    return leaf


@final
class _Opening:
    """A connection being made: its result, and whether its caller is still waiting."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.stream: RespStream | None = None
        self.error: Exception | None = None
        self.abandoned = False


@final
class RespPool:
    """Connections to one server, each lent to one request at a time (see the module).

    Args:
        parts: The server's address, credentials and database.
        tls: The TLS context for ``rediss://``; None for plain TCP or a Unix socket.
        connect_timeout: Seconds a new connection may take, handshake included.
        max_connections: Connections open at once at most (lent, idle or draining).
        tls_host: The name the server's certificate is checked against; None for
            the host of *parts*.
    """

    def __init__(
        self,
        parts: UrlParts,
        tls: ssl.SSLContext | None,
        connect_timeout: float,
        max_connections: int = MAX_CONNECTIONS,
        tls_host: str | None = None,
    ) -> None:
        self._parts = parts
        self._tls = tls
        self._tls_host = tls_host
        self._connect_timeout = connect_timeout
        self.max_connections = max_connections
        self._room = trio.Semaphore(max_connections)  # first come, first served
        self._idle: collections.deque[RespStream] = collections.deque()
        self._background: set[trio.CancelScope] = set()  # drains and connects under way
        self._closed = False
        self.opened = 0
        """Connections made so far (for tests and statistics)."""
        self.drained = 0
        """Connections a cancelled request left owing replies that were lent again."""

    @property
    def where(self) -> str:
        """The server's address, for messages."""
        parts = self._parts
        return parts.socket_path or f"{parts.host}:{parts.port}"

    @property
    def open_connections(self) -> int:
        """Connections open now (or being made): lent, idle or being drained.

        Each one but the idle holds a room; an idle one is taken before a room's
        holder makes a new one, so this never exceeds `max_connections`.
        """
        return self.max_connections - self._room.value + len(self._idle)

    async def _open(self, deadline: float) -> RespStream:
        """A new connection, made in a task of the pool's own; the caller holds a room.

        A caller cancelled or out of time while it is made leaves it (and the room)
        to that task, which makes it idle when it is ready: a storm of short
        deadlines does not open one connection after another only to drop each
        half-made.
        """
        opening = _Opening()
        self._start(self._make, opening, "trioqueue.redis connect")
        try:
            with trio.move_on_at(deadline):
                await opening.done.wait()
        except BaseException:
            self._leave(opening)
            raise
        if not opening.done.is_set():
            self._leave(opening)
            raise NoReply(f"no connection to {self.where} by the request's deadline")
        if opening.error is not None:
            self._room.release()
            raise opening.error
        assert opening.stream is not None
        return opening.stream

    def _leave(self, opening: _Opening) -> None:
        """The caller waiting for *opening* is gone: the connection goes idle when made."""
        opening.abandoned = True
        if opening.done.is_set():  # made (or failed) just as the caller left
            self._adopt(opening)

    def _adopt(self, opening: _Opening) -> None:
        if opening.stream is not None and not self._closed:
            opening.stream.idle_since = trio.current_time()
            self._idle.append(opening.stream)
        elif opening.stream is not None:
            self._start(self._aclose_stream, opening.stream, "trioqueue.redis close")
            return  # that task frees the room
        self._room.release()

    async def _aclose_stream(self, stream: RespStream, scope: trio.CancelScope) -> None:
        try:
            with trio.CancelScope(shield=True):
                await stream.aclose()
        finally:
            self._background.discard(scope)
            self._room.release()

    async def _make(self, opening: _Opening, scope: trio.CancelScope) -> None:
        """Make *opening*'s connection within the connect timeout (a system task: never raises)."""
        try:
            with scope:
                scope.deadline = trio.current_time() + self._connect_timeout
                try:
                    opening.stream = await open_stream(self._parts, self._tls, self._tls_host)
                except BaseExceptionGroup as group:  # open_tcp_stream's nursery, cancelled
                    raise _first_cancelled(group) or group from None
                self.opened += 1
            if opening.stream is None:
                opening.error = NoReply(
                    f"no connection to {self.where} within {self._connect_timeout:g} s"
                )
        except (ConnectionLost, ReplyError) as exc:
            opening.error = exc
        except Exception as exc:  # a system task must not raise: the caller gets it
            opening.error = ConnectionLost(f"{type(exc).__name__}: {exc}")
        finally:
            self._background.discard(scope)
            opening.done.set()
            if opening.abandoned:
                self._adopt(opening)

    def _start(
        self, task: Callable[[Any, trio.CancelScope], Awaitable[None]], arg: Any, name: str
    ) -> None:
        """Run *task* (arg, its scope) in a system task that `aclose` cancels."""
        scope = trio.CancelScope()
        self._background.add(scope)
        trio.lowlevel.spawn_system_task(task, arg, scope, name=name)

    async def _take_idle(self) -> RespStream | None:
        """The most recently used sound idle connection; the stale ones closed."""
        now = trio.current_time()
        while self._idle and now - self._idle[0].idle_since > IDLE_LIMIT:
            await self._close(self._idle.popleft())
        while self._idle:
            stream = self._idle.pop()
            if now - stream.idle_since <= _CHECK_AFTER or not stream.looks_closed():
                return stream
            await self._close(stream)
        return None

    async def _close(self, stream: RespStream) -> None:
        with trio.CancelScope(shield=True):
            await stream.aclose()

    @contextlib.asynccontextmanager
    async def connection(self, deadline: float = math.inf) -> AsyncIterator[RespStream]:
        """Lend a connection for the block (see the module for what happens after).

        Waits for room until *deadline* (Trio's clock) when every connection is lent.

        Raises:
            ConnectionLost: No connection could be made, the pool is closed, or
                (`NoReply`) none became free by *deadline*.
            ReplyError: The server refused the handshake.
        """
        if self._closed:
            raise ConnectionLost("the connection pool is closed")
        await trio.lowlevel.checkpoint_if_cancelled()
        try:  # free room: no yield (the request's wait for its reply is its checkpoint)
            self._room.acquire_nowait()
        except trio.WouldBlock:
            with trio.move_on_at(deadline) as waited:
                await self._room.acquire()  # in order: a Trio semaphore hands room over FIFO
            if waited.cancelled_caught:
                raise NoReply(
                    f"all {self.max_connections} connections to {self.where} stayed busy until "
                    "the deadline: run fewer commands at once, or give RedisBackend a larger "
                    "max_connections"
                ) from None
        try:
            stream = await self._take_idle()
        except BaseException:
            self._room.release()
            raise
        if stream is None:
            stream = await self._open(deadline)  # frees the room itself if it fails
        stream.blocking = False
        try:
            yield stream
        except ConnectionLost as exc:
            if isinstance(exc, NoReply):
                self._settle(stream)
            else:
                await self._close_all(stream)
            raise
        except BaseException:
            self._settle(stream)
            raise
        self._give_back(stream)

    def _give_back(self, stream: RespStream) -> None:
        """Make *stream* idle again, or close it, and free its room."""
        if self._closed or stream.unsound or stream.owed:
            self._start_drain(stream)
            return
        stream.idle_since = trio.current_time()
        self._idle.append(stream)
        self._room.release()

    def _settle(self, stream: RespStream) -> None:
        """After a request that did not end normally: drain *stream* off the caller's path."""
        if stream.owed == 0 and not stream.unsound and not self._closed:
            self._give_back(stream)  # cancelled before it sent, or after the whole reply
        elif stream.blocking:  # closing it ends the wait on the server
            stream.unsound = True
            self._start_drain(stream)
        else:
            self._start_drain(stream)

    def _start_drain(self, stream: RespStream) -> None:
        self._start(self._drain, stream, "trioqueue.redis drain")

    async def _drain(self, stream: RespStream, scope: trio.CancelScope) -> None:
        """Read off and drop what *stream* owes, then lend it again; close it if that fails.

        A Trio system task: it must not raise, and it frees the stream's room whatever happens.
        """
        sound = False
        try:
            with scope:
                scope.deadline = trio.current_time() + DRAIN_TIMEOUT
                while stream.owed > 0 and not stream.unsound and not self._closed:
                    await stream.reply()
                sound = not (stream.unsound or self._closed or stream.owed)
        except Exception:  # a lost connection: closed below
            sound = False
        finally:
            self._background.discard(scope)
            if sound:
                self.drained += 1
                stream.idle_since = trio.current_time()
                self._idle.append(stream)
            else:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
            self._room.release()

    async def _close_all(self, stream: RespStream) -> None:
        """*stream* broke: close it, and the idle ones (from before the same restart, likely)."""
        with trio.CancelScope(shield=True):
            await stream.aclose()
            idle, self._idle = self._idle, collections.deque()
            for other in idle:
                await other.aclose()
        self._room.release()

    async def send_encoded(
        self, command: bytes, deadline: float = math.inf, *, blocking: bool = False
    ) -> Any:
        """One encoded command's reply (`encode`, `Prefix`); an error reply returned.

        *blocking*: the command may block on the server (see `RespStream.blocking`).

        Raises:
            ConnectionLost: The connection failed before the reply came; `NoReply`
                when nothing came by *deadline*.
        """
        started = trio.current_time()
        async with self.connection(deadline) as stream:
            stream.blocking = blocking
            with trio.move_on_at(deadline):
                return await stream.round_trip(command)
            raise NoReply(f"no reply from {self.where} within {deadline - started:.3g} s")

    async def execute(self, *args: Arg, deadline: float = math.inf, blocking: bool = False) -> Any:
        """One command's reply; an error reply is returned as a `ReplyError`, not raised."""
        return await self.send_encoded(encode(*args), deadline, blocking=blocking)

    async def execute_beside(
        self, stream: RespStream, *args: Arg, deadline: float = math.inf
    ) -> Any:
        """`execute` on the server of the lent connection *stream*: this pool's one server."""
        del stream
        return await self.execute(*args, deadline=deadline)

    async def pipeline(
        self, commands: Sequence[Sequence[Arg] | bytes], deadline: float = math.inf
    ) -> list[Any]:
        """The replies of *commands* (argument lists, or encoded already), sent together."""
        data = b"".join(c if isinstance(c, bytes) else encode(*c) for c in commands)
        started = trio.current_time()
        async with self.connection(deadline) as stream:
            with trio.move_on_at(deadline):
                await stream.send(data, len(commands))
                return [await stream.reply() for _ in commands]
            raise NoReply(f"no reply from {self.where} within {deadline - started:.3g} s")

    async def aclose(self) -> None:
        """Close every idle connection and stop the drains; lent ones close when given back."""
        self._closed = True
        for scope in list(self._background):
            scope.cancel()
        idle, self._idle = self._idle, collections.deque()
        for stream in idle:
            await stream.aclose()
