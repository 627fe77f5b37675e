"""Redis's wire protocol on Trio's own sockets, replies parsed by hiredis.

A `RespPool` keeps idle connections to one server and lends one to each request:
the command goes out in one ``send_all``, and the reply is read back on the same
connection, parsed by hiredis (the C parser redis-py uses). No thread and no
task sits between a request and its reply, which makes a round trip less than
half of what it costs through valkey-glide or coredis on Trio
(docs/benchmarks.md, "The Redis client").

A connection goes back to the pool only when its request ended with a reply. One
whose request failed, timed out or was cancelled half-way is closed: what it
still owes would be taken for the next request's reply. When one fails on a
broken stream, the idle ones are closed too: they most likely date from before
the same restart.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final, final

import hiredis
import trio

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Sequence

    from ._probe import UrlParts

__all__ = ["Arg", "ConnectionLost", "Prefix", "ReplyError", "RespPool", "RespStream", "encode"]

_READ: Final = 65_536  # bytes asked of the socket per read


class ReplyError(Exception):
    """An error reply of the server (``-ERR ...``); the stream it came on is sound."""


class ConnectionLost(Exception):
    """The connection broke, closed, or could not be made; the text says how."""


Arg = str | bytes | int | float


def _bulk(value: Arg) -> bytes:
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        raw = value.encode()
    else:
        raw = repr(value).encode()
    return b"$%d\r\n%b\r\n" % (len(raw), raw)


def encode(*args: Arg) -> bytes:
    """One command as the RESP array of bulk strings the server reads."""
    return b"*%d\r\n" % len(args) + b"".join([_bulk(arg) for arg in args])


@final
class Prefix:
    """The first words of many commands, encoded once (a script's name and its keys)."""

    def __init__(self, *words: Arg) -> None:
        self._count = len(words)
        self._encoded = b"".join([_bulk(word) for word in words])

    def encode(self, *args: Arg) -> bytes:
        """The command of these first words and then *args*."""
        head = b"*%d\r\n" % (self._count + len(args))
        return head + self._encoded + b"".join([_bulk(arg) for arg in args])


@final
class RespStream:
    """One connection: requests go out whole, replies come back in order."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._reader = hiredis.Reader(replyError=ReplyError)
        self.client_id: int | None = None
        """The server's id of this connection (``CLIENT ID``), once asked."""
        self.broken = False
        """Whether the server said it closes the connection (a protocol error)."""

    async def send(self, data: bytes) -> None:
        """Write *data* whole.

        Raises:
            ConnectionLost: The stream is broken.
        """
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise ConnectionLost(str(exc) or type(exc).__name__) from exc

    async def reply(self) -> Any:
        """The next reply; an error reply is returned as a `ReplyError`, not raised.

        Raises:
            ConnectionLost: The stream broke or closed before the reply was whole.
        """
        reader = self._reader
        while (reply := reader.gets()) is False:
            try:
                data = await self._stream.receive_some(_READ)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise ConnectionLost(str(exc) or type(exc).__name__) from exc
            if not data:
                raise ConnectionLost("the server closed the connection")
            reader.feed(bytes(data))
        if isinstance(reply, ReplyError) and str(reply).startswith("ERR Protocol error"):
            self.broken = True  # the server closes the connection after saying so
        return reply

    async def request(self, *args: Arg) -> Any:
        """Send one command and return its reply (an error reply returned, not raised)."""
        return await self.round_trip(encode(*args))

    async def round_trip(self, command: bytes) -> Any:
        """Send one encoded command and return its reply (an error reply returned)."""
        await self.send(command)
        return await self.reply()

    async def aclose(self) -> None:
        """Close the connection at once."""
        await trio.aclose_forcefully(self._stream)


async def _connect(parts: UrlParts, tls: ssl.SSLContext | None) -> trio.abc.Stream:
    if parts.socket_path is not None:
        return await trio.open_unix_socket(parts.socket_path)
    stream: trio.abc.Stream = await trio.open_tcp_stream(parts.host, parts.port)
    if tls is not None:
        secure = trio.SSLStream(stream, tls, server_hostname=parts.host)
        try:
            await secure.do_handshake()
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        stream = secure
    return stream


async def open_stream(parts: UrlParts, tls: ssl.SSLContext | None) -> RespStream:
    """A connection to the server *parts* name, authenticated, its database selected.

    Raises:
        ConnectionLost: It could not be made (refused, unreachable, TLS failed).
        ReplyError: The server refused ``AUTH`` or ``SELECT``.
    """
    try:
        raw = await _connect(parts, tls)
    except (OSError, trio.BrokenResourceError) as exc:  # ssl.SSLError is an OSError
        raise ConnectionLost(str(exc) or type(exc).__name__) from exc
    stream = RespStream(raw)
    try:
        if parts.password is not None:
            words = [*([parts.username] if parts.username else []), parts.password]
            await _expect_ok(stream, "AUTH", *words)
        if parts.db:
            await _expect_ok(stream, "SELECT", parts.db)
    except BaseException:
        await stream.aclose()
        raise
    return stream


async def _expect_ok(stream: RespStream, *command: Arg) -> None:
    reply = await stream.request(*command)
    if isinstance(reply, ReplyError):
        raise reply


@final
class RespPool:
    """Connections to one server, each lent to one request at a time (see the module).

    Args:
        parts: The server's address, credentials and database.
        tls: The TLS context for ``rediss://``; None for plain TCP or a Unix socket.
        connect_timeout: Seconds a new connection may take, handshake included.
    """

    def __init__(self, parts: UrlParts, tls: ssl.SSLContext | None, connect_timeout: float) -> None:
        self._parts = parts
        self._tls = tls
        self._connect_timeout = connect_timeout
        self._idle: list[RespStream] = []
        self._closed = False

    async def _open(self) -> RespStream:
        with trio.move_on_after(self._connect_timeout):
            return await open_stream(self._parts, self._tls)
        raise ConnectionLost(f"no connection within {self._connect_timeout:g} s")

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[RespStream]:
        """Lend a connection for the block; it goes back only if the block ends normally.

        Raises:
            ConnectionLost: No connection could be made, or the pool is closed.
            ReplyError: The server refused the handshake.
        """
        if self._closed:
            raise ConnectionLost("the connection pool is closed")
        stream = self._idle.pop() if self._idle else await self._open()
        try:
            yield stream
        except ConnectionLost:
            await self._discard(stream, everything=True)
            raise
        except BaseException:
            await self._discard(stream)
            raise
        if self._closed or stream.broken:
            await stream.aclose()
        else:
            self._idle.append(stream)

    async def _discard(self, stream: RespStream, *, everything: bool = False) -> None:
        with trio.CancelScope(shield=True):
            await stream.aclose()
            if everything:
                idle, self._idle = self._idle, []
                for other in idle:
                    await other.aclose()

    async def execute(self, *args: Arg) -> Any:
        """One command's reply; an error reply is returned as a `ReplyError`, not raised.

        Raises:
            ConnectionLost: The connection failed before the reply came.
        """
        return await self.send_encoded(encode(*args))

    async def send_encoded(self, command: bytes) -> Any:
        """`execute` for a command encoded already (`encode`, `Prefix`)."""
        async with self.connection() as stream:
            return await stream.round_trip(command)

    async def execute_beside(self, stream: RespStream, *args: Arg) -> Any:
        """`execute` on the server of the lent connection *stream*: this pool's one server."""
        del stream
        return await self.execute(*args)

    async def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """The replies of *commands*, sent together on one connection (errors as values)."""
        async with self.connection() as stream:
            await stream.send(b"".join(encode(*command) for command in commands))
            return [await stream.reply() for _ in commands]

    async def aclose(self) -> None:
        """Close every idle connection; lent ones close when given back."""
        self._closed = True
        idle, self._idle = self._idle, []
        for stream in idle:
            await stream.aclose()
