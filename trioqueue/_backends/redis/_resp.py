"""Redis's wire protocol on Trio's own sockets, replies parsed by hiredis.

A `RespStream` is one connection: a command goes out in one write, and its
reply is read back on the same connection, parsed by hiredis (the C parser
redis-py uses). It counts the replies it owes, so that its pool (`_resp_pool`)
knows what a cancelled request left behind. `open_stream` makes one: TCP with
keepalive (or a Unix socket), TLS by Trio's `SSLStream`, then AUTH, SELECT and
CLIENT SETNAME in one write.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from typing import TYPE_CHECKING, Any, Final, final

import trio

try:
    import hiredis
except ImportError:  # the redis extra is not installed: `require_parser` says so
    hiredis = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import ssl

    from ._url_parts import UrlParts

__all__ = [
    "CLIENT_NAME",
    "Arg",
    "ConnectionLost",
    "NoReply",
    "Prefix",
    "ReplyError",
    "RespStream",
    "encode",
    "open_stream",
    "require_parser",
]

INSTALL: Final = "pip install 'trioqueue[redis]' (in a checkout: pip install '.[redis]')"

_READ: Final = 65_536  # bytes asked of the socket per read

_KEEPALIVE: Final = (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3))
CLIENT_NAME: Final = f"trioqueue-{os.getpid()}"
"""The name each connection gives itself (``CLIENT SETNAME``), as ``CLIENT LIST`` shows it."""


class ReplyError(Exception):
    """An error reply of the server (``-ERR ...``); the stream it came on is sound."""


class ConnectionLost(Exception):
    """The connection broke, closed, or could not be made; the text says how."""


class NoReply(ConnectionLost):
    """No reply came by the request's deadline; the command may or may not have run."""


Arg = str | bytes | int | float


def _bulk(value: Arg) -> bytes:
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        raw = value.encode()
    else:
        raw = repr(value).encode()
    return b"$%d\r\n%b\r\n" % (len(raw), raw)


def require_parser() -> None:
    """Check that hiredis, the reply parser, is installed.

    Raises:
        ImportError: It is not; the message says what to install.
    """
    if hiredis is None:
        raise ImportError(
            f"trioqueue.RedisBackend needs hiredis, the Redis reply parser: {INSTALL}"
        )


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


def _raw_socket(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket of a plain TCP or Unix stream; None over TLS."""
    return stream.socket if isinstance(stream, trio.SocketStream) else None


@final
class RespStream:
    """One connection: requests go out whole, replies come back in order.

    It counts what it owes: the replies to commands sent and not yet read. A
    send cut off half-way leaves it `unsound` (the server may hold half a command).
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        require_parser()
        self._reader = hiredis.Reader(replyError=ReplyError)
        self._socket = _raw_socket(stream)
        # written to directly where a socket's descriptor takes os.write (not Windows)
        self._fd = (
            self._socket.fileno() if self._socket is not None and os.name == "posix" else None
        )
        self.client_id: int | None = None
        """The server's id of this connection (``CLIENT ID``), once asked."""
        self.owed = 0
        """Replies to commands sent that are not read yet."""
        self.unsound = False
        """Whether it can never be lent again: a send cut off, or the server said it closes."""
        self.idle_since = 0.0
        """When it was last given back (Trio's clock)."""
        self.blocking = False
        """Whether the request it is lent for may block on the server (``BLPOP``, ...):
        cancelled, it is closed, which ends the wait, rather than drained, which
        would let the wait take what arrives later for nobody."""

    async def send(self, data: bytes, replies: int = 1) -> None:
        """Write *data* whole: commands owing *replies* replies.

        On a plain socket with room for it (the usual case) the write is one system
        call and no yield to the scheduler: the reply's wait is the request's one
        checkpoint after this call's check for a cancellation.

        Raises:
            ConnectionLost: The stream is broken.
        """
        # a cancellation that comes before the first byte leaves the stream sound: the
        # check and the write have no yield between them (Trio delivers a cancellation
        # only at a checkpoint); the stream is unsound only while the write is under way
        await trio.lowlevel.checkpoint_if_cancelled()
        self.unsound = True  # until the whole command is out: half of one poisons the stream
        try:
            if self._fd is not None:
                try:
                    sent = os.write(self._fd, data)
                except BlockingIOError:
                    sent = 0
                data = data[sent:]
            if data:
                await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise ConnectionLost(str(exc) or type(exc).__name__) from exc
        self.unsound = False
        self.owed += replies

    async def reply(self) -> Any:
        """The next reply; an error reply is returned as a `ReplyError`, not raised.

        A cancelled read loses no byte: the parser keeps what came.

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
        self.owed -= 1
        if isinstance(reply, ReplyError) and str(reply).startswith("ERR Protocol error"):
            self.unsound = True  # the server closes the connection after saying so
        return reply

    async def request(self, *args: Arg) -> Any:
        """Send one command and return its reply (an error reply returned, not raised)."""
        return await self.round_trip(encode(*args))

    async def round_trip(self, command: bytes) -> Any:
        """Send one encoded command and return its reply (an error reply returned)."""
        await self.send(command)
        return await self.reply()

    def looks_closed(self) -> bool:
        """Whether an idle plain connection has something to read: the server closed it.

        An idle connection owes nothing, so any byte (or end-of-file) waiting on it
        means it is not fit to lend. One system call; over TLS, always False.
        """
        if self._socket is None:
            return False
        try:
            readable, _, _ = select.select([self._socket.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def aclose(self) -> None:
        """Close the connection at once."""
        await trio.aclose_forcefully(self._stream)


def _keepalive(stream: trio.SocketStream) -> None:
    """TCP keepalive, so that a connection a network dropped silently is found out."""
    stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in _KEEPALIVE:
        option = getattr(socket, name, None)
        if option is not None:  # Linux names them all; macOS has TCP_KEEPINTVL and CNT
            with contextlib.suppress(OSError):
                stream.setsockopt(socket.IPPROTO_TCP, option, value)


async def _connect(
    parts: UrlParts, tls: ssl.SSLContext | None, tls_host: str | None
) -> trio.abc.Stream:
    if parts.socket_path is not None:
        return await trio.open_unix_socket(parts.socket_path)
    plain = await trio.open_tcp_stream(parts.host, parts.port)
    _keepalive(plain)
    if tls is None:
        return plain
    secure = trio.SSLStream(plain, tls, server_hostname=tls_host or parts.host)
    try:
        await secure.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(plain)
        raise
    return secure


def _handshake(parts: UrlParts) -> list[tuple[Arg, ...]]:
    """What a new connection sends first, in one write: AUTH, SELECT, CLIENT SETNAME."""
    commands: list[tuple[Arg, ...]] = []
    if parts.password is not None:
        commands.append(("AUTH", *([parts.username] if parts.username else []), parts.password))
    if parts.db:
        commands.append(("SELECT", parts.db))
    commands.append(("CLIENT", "SETNAME", CLIENT_NAME))
    return commands


async def open_stream(
    parts: UrlParts, tls: ssl.SSLContext | None, tls_host: str | None = None
) -> RespStream:
    """A connection to the server *parts* name, authenticated, its database selected.

    AUTH, SELECT and CLIENT SETNAME go in one write (one round trip). A refused
    name (an ACL without ``client|setname``) is no reason to fail. Over TLS the
    certificate is checked against *tls_host* when given, else the URL's host.

    Raises:
        ConnectionLost: It could not be made (refused, unreachable, TLS failed).
        ReplyError: The server refused ``AUTH`` or ``SELECT``.
    """
    try:
        raw = await _connect(parts, tls, tls_host)
    except (OSError, trio.BrokenResourceError) as exc:  # ssl.SSLError is an OSError
        raise ConnectionLost(str(exc) or type(exc).__name__) from exc
    stream = RespStream(raw)
    try:
        commands = _handshake(parts)
        await stream.send(b"".join(encode(*command) for command in commands), len(commands))
        replies = [await stream.reply() for _ in commands]
        for command, reply in zip(commands, replies, strict=True):
            if isinstance(reply, ReplyError) and command[0] != "CLIENT":
                raise reply
    except BaseException:
        await stream.aclose()
        raise
    return stream
