"""One queue's connection to Redis on Trio's own sockets, parsed by hiredis (see `ConnectionBase`).

The one client (``redis://``, ``rediss://``, ``unix://``, and a Redis Cluster
with ``?cluster=yes``): a request is one ``send_all`` and one read on a pooled
connection (``_resp_pool.py``). On a cluster the pool is that of the node serving the
queue's slot, following the cluster's redirects (``_resp_cluster.py``).
``wait_replicas`` sends the add script and the ``WAIT`` that counts its writes
together on one connection.

A broken, refused or silent connection is `BackendUnavailable`, refused
credentials `CredentialsRefused`, a script the server refuses `BackendRefused`.
Nothing is sent again by itself, except a command the cluster answered with a
redirect (it did not run): a script whose reply was lost may have run, and the
pool decides what to do. Every request ends by one deadline: the I/O timeout,
or the caller's sooner `io_deadline`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ..._exceptions import BackendUnavailable, ConfigurationError
from ..._io_deadline import current_io_deadline
from ._connection import (
    CREDENTIAL_WORDS,
    IO_TIMEOUT,
    TRANSIENT_REPLIES,
    ConnectionBase,
    user_refusal,
)
from ._keys import hash_slot
from ._resp import (
    Arg,
    ConnectionLost,
    NoReply,
    Prefix,
    ReplyError,
    RespStream,
    encode,
    require_parser,
)
from ._resp_cluster import SlotPool
from ._resp_pool import MAX_CONNECTIONS, RespPool
from ._scripts import load_sources
from ._url import CredentialsRefused, failure_detail, scrubbed, wants_cluster
from ._url_parts import tls_context, url_parts

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ._keys import RedisKeys

__all__ = ["HiredisConnection"]

logger = logging.getLogger("trioqueue.redis")

_CONNECT_TIMEOUT: Final = 2.0  # seconds for a new connection, TLS and AUTH included
_UNBLOCK_AGAIN: Final = 0.01  # seconds before an UNBLOCK that found no wait goes again
_MOVED_PAUSE: Final = 0.01  # seconds before a wait the cluster redirected is given up
# a user's command that may wait on the server: closed, not drained, when cancelled
_MAY_BLOCK: Final = frozenset(
    [
        "BLPOP",
        "BRPOP",
        "BRPOPLPUSH",
        "BLMOVE",
        "BLMPOP",
        "BZPOPMIN",
        "BZPOPMAX",
        "BZMPOP",
        "XREAD",
        "XREADGROUP",
        "WAIT",
        "WAITAOF",
    ]
)


@final
class HiredisConnection(ConnectionBase):
    """The pooled connections of one queue, opened and closed by its backend.

    Args:
        url: ``redis://host:port/db``.
        keys: The queue's keys, passed to every script in the prelude's order.
        head: Returns the shared head of arguments for each script call.
        max_connections: Connections to each server at most.
    """

    def __init__(
        self,
        url: str,
        keys: RedisKeys,
        head: Callable[[], Sequence[str | bytes | float]],
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        require_parser()
        super().__init__(url, keys, head)
        self._parts = url_parts(url)
        self._max_connections = max_connections
        self._unblock_refused = False  # said once: a refused CLIENT UNBLOCK
        script_keys = self._key_list
        # EVALSHA, the script's digest and the queue's keys: the same in every call
        self._calls = {
            name: (
                Prefix(
                    "EVALSHA",
                    hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest(),
                    len(script_keys),
                    *script_keys,
                ),
                Prefix("EVAL", source, len(script_keys), *script_keys),
            )
            for name, source in load_sources().items()
        }

    async def open(self) -> None:
        """Make the pool (connecting happens on first use)."""
        parts = self._parts
        try:
            tls = tls_context(parts) if parts.scheme == "rediss" else None
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read the certificates the URL names ({exc}): give the paths of "
                "PEM files this process can read"
            ) from exc
        if wants_cluster(self._url):
            slot = hash_slot(self._keys.ready)
            self._client = SlotPool(parts, tls, _CONNECT_TIMEOUT, slot, self._max_connections)
        else:
            self._client = RespPool(parts, tls, _CONNECT_TIMEOUT, self._max_connections)

    async def close(self) -> None:
        """Close every connection."""
        pool, self._client = self._client, None
        if pool is not None:
            with trio.CancelScope(shield=True):
                await pool.aclose()

    @contextlib.contextmanager
    def reachable(self) -> Iterator[None]:
        """Turn a lost connection into `BackendUnavailable`, an error reply into its meaning.

        See `_meaning`; other error replies pass through.
        """
        try:
            yield
        except ConnectionLost as exc:
            raise BackendUnavailable(self.where, failure_detail(exc, self._url)) from exc
        except ReplyError as exc:
            meaning = self._meaning(exc)
            if meaning is None:
                raise
            raise meaning from exc

    def _meaning(self, reply: ReplyError) -> Exception | None:
        """Refused credentials, a missing database, or a "not now" (``LOADING``, ...)."""
        detail = scrubbed(str(reply), self._url)
        if any(word in detail for word in CREDENTIAL_WORDS):
            return CredentialsRefused(self.where, detail)
        if no_database := self._no_database(detail):
            return no_database
        if detail.startswith(TRANSIENT_REPLIES):
            return BackendUnavailable(self.where, detail)
        return None

    def _deadline(self, extra: float = 0.0) -> float:
        """When a request starting now must have its reply.

        The I/O timeout (plus *extra*, a server-side wait), or the caller's sooner
        `io_deadline`.
        """
        return min(trio.current_time() + IO_TIMEOUT + extra, current_io_deadline())

    def _no_reply(self, what: str, started: float, deadline: float) -> BackendUnavailable:
        return BackendUnavailable(
            self.where, f"no reply to {what} within {deadline - started:.3g} s"
        )

    async def _reply(
        self,
        *args: Arg,
        beside: RespStream | None = None,
        key: Arg | None = None,
        blocking: bool = False,
    ) -> Any:
        """One plain command's reply by the deadline; an error reply as a value.

        With *beside* (a lent connection), on the server that connection is to;
        with *key* (on a cluster), on the node serving that key's slot.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
        """
        deadline = self._deadline()
        client = self.client
        with self.reachable():
            if beside is not None:
                reply = await client.execute_beside(beside, *args, deadline=deadline)
            elif key is not None and isinstance(client, SlotPool):
                slot = hash_slot(key if isinstance(key, str | bytes) else repr(key))
                reply = await client.execute(*args, slot=slot, deadline=deadline, blocking=blocking)
            else:
                reply = await client.execute(*args, deadline=deadline, blocking=blocking)
        if isinstance(reply, ReplyError) and (meaning := self._meaning(reply)):
            raise meaning from reply
        return reply

    async def _command(self, *args: Arg) -> Any:
        """One of the backend's own commands: its reply.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
            BackendRefused: The server refused it (a key of the queue changed by hand).
        """
        reply = await self._reply(*args)
        if isinstance(reply, ReplyError):
            raise await self._refusal(_name(args[0]), reply) from reply
        return reply

    async def command(self, *args: Arg) -> Any:
        """One command of the user's: its reply as RESP2 gives it.

        On a cluster it goes to the node of its first argument's slot: the key of
        most commands (else the cluster's ``MOVED`` corrects it). Cancelled, it
        leaves its connection to the pool, which reads off the reply it owes.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
            BackendRefused: The server refused the command (its message).
        """
        blocking = _name(args[0]).upper() in _MAY_BLOCK
        key = args[1] if len(args) > 1 else None
        reply = await self._reply(*args, key=key, blocking=blocking)
        if isinstance(reply, ReplyError):
            raise user_refusal(self.where, args, str(reply)) from reply
        return reply

    async def hash(self, key: str) -> dict[bytes, bytes]:
        """``HGETALL key``: the fields of one hash, empty when there is none."""
        return _pairs(await self._command("HGETALL", key))

    async def hashes(self, keys: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The fields of many hashes, in one round trip (a pipeline)."""
        if not keys:
            return []
        with self.reachable():
            replies = await self.client.pipeline(
                [("HGETALL", key) for key in keys], deadline=self._deadline()
            )
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise await self._refusal("HGETALL", reply) from reply
        return [_pairs(reply) for reply in replies]

    async def list_items(self, key: str, start: int = 0, stop: int = -1) -> list[bytes]:
        """``LRANGE key start stop``: by default every element of a list, head first."""
        return list(await self._command("LRANGE", key, start, stop))

    async def exists(self, *keys: str) -> int:
        """``EXISTS``: how many of *keys* exist."""
        return int(await self._command("EXISTS", *keys))

    async def blmove(self, source: str, destination: str, block: float) -> bytes | None:
        """``BLMOVE source destination RIGHT LEFT block``, cancellable at once.

        The wait holds a connection of its own. When the caller is cancelled, a
        ``CLIENT UNBLOCK`` from another connection ends the wait on the server, and
        an element that was moved before it landed is put back (the ``unmove``
        script: the front of *source*, or first among the stored jobs when producers
        filled the room it left), so a cancelled wait neither strands a job nor
        overfills the queue.

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """
        command = ("BLMOVE", source, destination, "RIGHT", "LEFT", block)
        reply = await self._blocking(command, block, undo="unmove")
        assert reply is None or isinstance(reply, bytes)
        return reply

    async def wait_for_entries(self, streams: dict[str, str], block: float) -> None:
        """Return once a stream of *streams* has an entry after its id, or after *block* seconds.

        ``XREAD BLOCK``, which reads without taking: a cancelled wait changes nothing.

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """
        command = ("XREAD", "BLOCK", max(1, round(block * 1000)), "COUNT", 1, "STREAMS")
        await self._blocking((*command, *streams, *streams.values()), block)

    async def _blocking(
        self, command: tuple[Arg, ...], block: float, undo: str | None = None
    ) -> Any:
        """Run the blocking *command* on a connection of its own, cancellable at once.

        When the caller is cancelled, a ``CLIENT UNBLOCK`` ends the wait on the
        server, and a reply that came all the same is given to script *undo*. The
        cancellation is what the caller gets, whatever that clean-up meets.
        """
        with self.reachable():
            async with self.client.connection(self._deadline()) as stream:
                if stream.client_id is None:  # asked once per connection
                    reply = await stream.request("CLIENT", "ID")
                    if isinstance(reply, ReplyError):
                        raise self._meaning(reply) or await self._refusal("CLIENT ID", reply)
                    stream.client_id = int(reply)
                client_id = stream.client_id
                stream.blocking = True  # if the wait cannot be ended, closing ends it
                await stream.send(encode(*command))
                try:
                    with trio.move_on_after(block + IO_TIMEOUT) as waited:
                        reply = await stream.reply()
                    if waited.cancelled_caught:
                        raise NoReply(f"no reply to {_name(command[0])} within {block:g} s")
                except trio.Cancelled:
                    await self._end_wait(stream, client_id, undo)
                    raise
        if isinstance(reply, ReplyError):
            client = self.client
            if isinstance(client, SlotPool) and client.heard(reply):
                # the slot moved, or is moving: the wait did nothing; the caller
                # looks again, through a script that follows the cluster
                await trio.sleep(_MOVED_PAUSE)
                return None
            if not str(reply).startswith("OOM"):
                raise await self._refusal(_name(command[0]), reply)
            # a full Redis refuses BLMOVE (the claim script is allowed: it found nothing
            # just now, and no job can be added while Redis is full): wait, then look again
            await trio.sleep(block)
            return None
        return reply

    async def _end_wait(self, stream: RespStream, client_id: int, undo: str | None) -> None:
        """A cancelled wait: end it on the server, and undo what it did meanwhile.

        Never raises: a failure is logged, and the connection, still owing the
        wait's reply, goes to the pool, which reads it off or closes it.
        """
        try:
            with trio.CancelScope(shield=True, deadline=self._deadline()):
                late = await self._unblocked(stream, client_id)
                if undo is not None and isinstance(late, bytes):
                    await self.run(undo, late)
        except Exception as exc:  # the caller's cancellation goes on all the same
            logger.warning("a cancelled wait for jobs could not be ended cleanly: %s", exc)

    async def _unblocked(self, stream: RespStream, client_id: int) -> Any:
        """End the wait on *stream* with ``CLIENT UNBLOCK``; the reply it then gives.

        The wait may reach the server after the first UNBLOCK does (then that one
        finds nothing to end), so UNBLOCK goes again until the reply comes. When
        the server refuses UNBLOCK, the wait ends by its own timeout.
        """
        while True:
            if await self.unblock(client_id, stream):
                return await stream.reply()
            if self._unblock_refused:
                return await stream.reply()
            with trio.move_on_after(_UNBLOCK_AGAIN):  # a cancelled read loses no byte
                return await stream.reply()

    async def unblock(self, client_id: int, beside: RespStream | None = None) -> bool:
        """End the blocking wait of connection *client_id*; whether one was waiting.

        On a cluster, *beside* is the waiting connection: the command goes to its
        node. A refusal (e.g. NOPERM) is logged once: the wait then ends by its own
        timeout.
        """
        reply = await self._reply("CLIENT", "UNBLOCK", client_id, "TIMEOUT", beside=beside)
        if isinstance(reply, ReplyError):
            if not self._unblock_refused:
                self._unblock_refused = True
                logger.warning(
                    "could not end a wait for jobs at once (%s); give the Redis user "
                    "+client|unblock (see the README's ACL)",
                    reply,
                )
            return False
        return bool(reply)

    async def _maxmemory(self) -> int:
        reply = await self._command("CONFIG", "GET", "maxmemory")
        return int(_pairs(reply).get(b"maxmemory", b"0") or 0)

    async def run(self, name: str, *args: str | bytes | float) -> Any:
        """Run script *name* with the shared head and *args*; its reply.

        ``EVALSHA``, and ``EVAL`` with the source when the server does not have it
        yet (a new server, a restart, ``SCRIPT FLUSH``). A checkpoint: cancelled
        before it sends the script, it raises `trio.Cancelled` and changes
        nothing; once sent, it waits for the reply (until the I/O timeout, or the
        caller's sooner `io_deadline`) so that a cancellation never hides a change.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time
                (then the script may or may not have run).
        """
        reply, _ = await self._run(name, args, None)
        return reply

    async def run_replicated(
        self, name: str, replicas: int, server_wait: float, *args: str | bytes | float
    ) -> tuple[Any, int]:
        """`run`, then ``WAIT replicas``: its reply, and how many replicas have its writes.

        The script and the ``WAIT`` go together on one connection, which is what
        ``WAIT`` counts: the writes made on its own connection.
        """
        wait = encode("WAIT", replicas, round(server_wait * 1000))
        reply, reached = await self._run(name, args, (wait, server_wait))
        return reply, reached

    async def _run(
        self, name: str, args: tuple[str | bytes | float, ...], wait: tuple[bytes, float] | None
    ) -> tuple[Any, int]:
        await trio.lowlevel.checkpoint_if_cancelled()
        pool = self.client
        by_digest, by_source = self._calls[name]
        tail = (*self._head(), *args)
        started = trio.current_time()
        deadline = self._deadline(wait[1] if wait else 0.0)
        reached = 0
        with trio.CancelScope(shield=True):
            try:
                with self.reachable():
                    reply, reached = await self._send_script(pool, by_digest, tail, wait, deadline)
                    if isinstance(reply, ReplyError) and str(reply).startswith("NOSCRIPT"):
                        reply, reached = await self._send_script(
                            pool, by_source, tail, wait, deadline
                        )
            except BackendUnavailable as exc:
                if isinstance(
                    exc.__cause__, NoReply
                ):  # the deadline passed: the outcome is unknown
                    raise self._no_reply(f"the {name} script", started, deadline) from exc
                raise
        if not isinstance(reply, ReplyError):
            return reply, reached
        raise self._meaning(reply) or await self._refusal(f"the {name} script", reply)

    @staticmethod
    async def _send_script(
        pool: RespPool | SlotPool,
        call: Prefix,
        tail: tuple[Arg, ...],
        wait: tuple[bytes, float] | None,
        deadline: float,
    ) -> tuple[Any, int]:
        """One script call (and its ``WAIT``, on the same connection): the replies."""
        if wait is None:
            return await pool.send_encoded(call.encode(*tail), deadline=deadline), 0
        reply, reached = await pool.pipeline([call.encode(*tail), wait[0]], deadline=deadline)
        return reply, int(reached) if isinstance(reached, int) else 0


def _pairs(reply: list[bytes]) -> dict[bytes, bytes]:
    """A flat RESP2 list of names and values as a dict."""
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _name(word: Arg) -> str:
    """A command's name, for messages."""
    return word.decode(errors="replace") if isinstance(word, bytes) else str(word)
