"""One queue's connection to Redis on Trio's own sockets, parsed by hiredis (see `ConnectionBase`).

The default client (``redis://``, ``rediss://``, ``unix://``, and a Redis Cluster
with ``?cluster=yes``): a request is one ``send_all`` and one read on a pooled
connection (``_resp.py``), less than half a round trip through valkey-glide or
coredis on Trio. On a cluster the pool is that of the node serving the queue's
slot, following the cluster's redirects (``_resp_cluster.py``). ``wait_replicas``
uses valkey-glide, whose one connection carries both the writes and the ``WAIT``
that counts them.

Errors mean what they mean on the other clients: a broken, refused or silent
connection is `BackendUnavailable`, refused credentials `CredentialsRefused`, a
script the server refuses `BackendRefused`. Nothing is sent again by itself,
except a command the cluster answered with a redirect (it did not run): a script
whose reply was lost may have run, and the pool decides what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ..._exceptions import BackendUnavailable, ConfigurationError
from ._connection import (
    CREDENTIAL_WORDS,
    IO_TIMEOUT,
    TRANSIENT_REPLIES,
    WAIT_NEEDS_GLIDE,
    ConnectionBase,
    log_unblock_refused,
    user_refusal,
)
from ._keys import hash_slot
from ._probe import tls_context, url_parts
from ._resp import Arg, ConnectionLost, Prefix, ReplyError, RespPool, RespStream, encode
from ._resp_cluster import SlotPool
from ._scripts import load_sources
from ._url import CredentialsRefused, failure_detail, scrubbed, wants_cluster

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ._keys import RedisKeys

__all__ = ["HiredisConnection"]

_CONNECT_TIMEOUT: Final = 2.0  # seconds for a new connection, TLS and AUTH included
_UNBLOCK_AGAIN: Final = 0.01  # seconds before an UNBLOCK that found no wait goes again
_MOVED_PAUSE: Final = 0.01  # seconds before a wait the cluster redirected is given up


@final
class HiredisConnection(ConnectionBase[RespPool | SlotPool]):
    """The pooled connections of one queue, opened and closed by its backend."""

    def __init__(
        self, url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
    ) -> None:
        super().__init__(url, keys, head)
        self._parts = url_parts(url)
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
            self._client = SlotPool(parts, tls, _CONNECT_TIMEOUT, slot)
        else:
            self._client = RespPool(parts, tls, _CONNECT_TIMEOUT)

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

    async def _reply(
        self, *args: Arg, beside: RespStream | None = None, key: Arg | None = None
    ) -> Any:
        """One plain command's reply within the I/O timeout; an error reply as a value.

        With *beside* (a lent connection), on the server that connection is to;
        with *key* (on a cluster), on the node serving that key's slot.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
        """
        with self.reachable():
            with trio.move_on_after(IO_TIMEOUT):
                client = self.client
                if beside is not None:
                    reply = await client.execute_beside(beside, *args)
                elif key is not None and isinstance(client, SlotPool):
                    slot = hash_slot(key if isinstance(key, str | bytes) else repr(key))
                    reply = await client.execute(*args, slot=slot)
                else:
                    reply = await client.execute(*args)
                if isinstance(reply, ReplyError) and (meaning := self._meaning(reply)):
                    raise meaning from reply
                return reply
            raise ConnectionLost(f"no reply to {_name(args[0])} within {IO_TIMEOUT:g} s")

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
        most commands (else the cluster's ``MOVED`` corrects it).

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
            BackendRefused: The server refused the command (its message).
        """
        reply = await self._reply(*args, key=args[1] if len(args) > 1 else None)
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
        replies: list[Any] | None = None
        with self.reachable():
            with trio.move_on_after(IO_TIMEOUT):
                replies = await self.client.pipeline([("HGETALL", key) for key in keys])
            if replies is None:
                raise ConnectionLost(f"no reply to HGETALL within {IO_TIMEOUT:g} s")
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

    async def wait_replicas(self, count: int, server_wait: float) -> int:
        """Not on this client: its pool may send ``WAIT`` on another connection than the writes.

        Raises:
            ConfigurationError: Always (`RedisBackend` chooses valkey-glide for *wait_replicas*).
        """
        raise ConfigurationError(WAIT_NEEDS_GLIDE)

    async def _blocking(
        self, command: tuple[Arg, ...], block: float, undo: str | None = None
    ) -> Any:
        """Run the blocking *command* on a connection of its own, cancellable at once.

        When the caller is cancelled, a ``CLIENT UNBLOCK`` ends the wait on the
        server, and a reply that came all the same is given to script *undo*.
        """
        with self.reachable():
            async with self.client.connection() as stream:
                if stream.client_id is None:  # asked once per connection
                    reply = await stream.request("CLIENT", "ID")
                    if isinstance(reply, ReplyError):
                        raise self._meaning(reply) or await self._refusal("CLIENT ID", reply)
                    stream.client_id = int(reply)
                client_id = stream.client_id
                await stream.send(encode(*command))
                try:
                    with trio.move_on_after(block + IO_TIMEOUT) as waited:
                        reply = await stream.reply()
                    if waited.cancelled_caught:
                        raise ConnectionLost(f"no reply to {_name(command[0])} within {block:g} s")
                except trio.Cancelled:
                    with trio.CancelScope(shield=True, deadline=trio.current_time() + IO_TIMEOUT):
                        late = await self._unblocked(stream, client_id)
                        if undo is not None and isinstance(late, bytes):
                            await self.run(undo, late)
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

    async def _unblocked(self, stream: RespStream, client_id: int) -> Any:
        """End the wait on *stream* with ``CLIENT UNBLOCK``; the reply it then gives.

        The wait may reach the server after the first UNBLOCK does (then that one
        finds nothing to end), so UNBLOCK goes again until the reply comes.
        """
        while True:
            if await self.unblock(client_id, stream):
                return await stream.reply()
            with trio.move_on_after(_UNBLOCK_AGAIN):  # a cancelled read loses no byte
                return await stream.reply()

    async def unblock(self, client_id: int, beside: RespStream | None = None) -> bool:
        """End the blocking wait of connection *client_id*; whether one was waiting.

        On a cluster, *beside* is the waiting connection: the command goes to its
        node. A refusal (e.g. NOPERM) is logged: the wait then ends by its own timeout.
        """
        reply = await self._reply("CLIENT", "UNBLOCK", client_id, "TIMEOUT", beside=beside)
        if isinstance(reply, ReplyError):
            log_unblock_refused(reply)
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
        nothing; once sent, it waits for the reply (at most the I/O timeout) so
        that a cancellation never hides a change.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time
                (then the script may or may not have run).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        pool = self.client
        by_digest, by_source = self._calls[name]
        tail = (*self._head(), *args)
        with trio.CancelScope(shield=True, deadline=trio.current_time() + IO_TIMEOUT):
            with self.reachable():
                reply = await pool.send_encoded(by_digest.encode(*tail))
                if isinstance(reply, ReplyError) and str(reply).startswith("NOSCRIPT"):
                    reply = await pool.send_encoded(by_source.encode(*tail))
            if not isinstance(reply, ReplyError):
                return reply
            raise self._meaning(reply) or await self._refusal(f"the {name} script", reply)
        raise BackendUnavailable(  # the shield's deadline passed: the outcome is unknown
            self.where, f"no reply to the {name} script within {IO_TIMEOUT}s"
        )


def _pairs(reply: list[bytes]) -> dict[bytes, bytes]:
    """A flat RESP2 list of names and values as a dict."""
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _name(word: Arg) -> str:
    """A command's name, for messages."""
    return word.decode(errors="replace") if isinstance(word, bytes) else str(word)
