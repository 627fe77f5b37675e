"""One queue's connection to Redis through valkey-glide (see `ConnectionBase`).

The same interface and the same meaning of errors as the coredis connection:
scripts get the queue's keys and the shared head of arguments, a reply that does
not come within the I/O timeout and any connection error become
`BackendUnavailable` (never showing the password), a script the server refuses
becomes `BackendRefused`. The client of ``wait_replicas`` and of
``TRIOQUEUE_REDIS_CLIENT=glide`` (see ``_client.py``); what differs from coredis
is said where it happens. Its client settings are in ``_glide_config.py``.

With ``?cluster=yes`` the clients are glide's cluster clients: they find the
cluster from the URL's node, send each script to the queue's slot, follow MOVED
and ASK, and follow a failover; what concerns the queue's node alone (the
waiting connection's id, ``CLIENT UNBLOCK``, ``CONFIG GET``) is routed to the
slot's primary.

glide multiplexes one connection per client, so each blocking ``BLMOVE`` gets a
client of its own (kept for the next wait): on a shared one, a cancelled wait's
moved element was lost, and two waits queued behind each other.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ..._exceptions import BackendUnavailable
from ._connection import (
    CREDENTIAL_WORDS,
    IO_TIMEOUT,
    ConnectionBase,
    is_redirect,
    log_unblock_refused,
    says_any,
    user_refusal,
)
from ._probe import probe
from ._scripts import load_sources
from ._url import CredentialsRefused, scrubbed, wants_cluster
from ._watch import LivenessWatch

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence

    from ._keys import RedisKeys
import glide

from ._glide_config import (
    GLIDE_TRANSIENT,
    Client,
    cluster_nodes,
    new_client,
    refuse_what_glide_cannot_do,
    server_said_no,
)

__all__ = ["GlideConnection"]


_PROBE_EVERY: Final = 5.0  # seconds a probe's finding stands


_LEARN_TIMEOUT: Final = 1.0  # seconds a cluster may take to name its nodes


_UNBLOCK_AGAIN: Final = 0.01  # seconds before an UNBLOCK that found no wait goes again


@final
class GlideConnection(ConnectionBase[Client]):
    """The glide client of one queue, opened and closed by its backend.

    URLs as `glide_configuration` reads them; otherwise see `ConnectionBase`.
    """

    can_wait_replicas = True  # one connection per node carries every script

    def __init__(
        self, url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
    ) -> None:
        super().__init__(url, keys, head)
        refuse_what_glide_cannot_do(url)  # here, not when the backend opens
        self._waiters: list[Client] = []  # idle clients for BLMOVE alone
        self._all_waiters: list[Client] = []
        # a cluster's nodes as it named them, and when: a new client (a waiting one)
        # and the probe reach the cluster through them, whichever nodes the URL names
        self._known: tuple[list[tuple[str, int]], float] = ([], -math.inf)
        self._scripts: dict[str, glide.Script] = {}
        self._probed: tuple[float, str | None] = (-math.inf, None)  # until when, what
        # glide holds a script sent while it reconnects: the watch gives it up if Redis is down
        # on a cluster, what concerns the queue's node goes to its slot's primary
        self._slot_route = glide.SlotKeyRoute(glide.SlotType.PRIMARY, keys.ready)
        self._watch = LivenessWatch(
            self._is_down,
            lambda: self._finding() or BackendUnavailable(self.where, "no reply, and Redis is up"),
        )

    async def open(self) -> None:
        """Create the client and the scripts (connecting happens on first use)."""
        with self.reachable():
            self._client = await new_client(self._url)
        scripts = load_sources().items()
        self._scripts = {name: glide.Script(src) for name, src in scripts}  # type: ignore[no-untyped-call]
        self._watch.start()

    async def close(self) -> None:
        """Close the client and the waiting ones."""
        self._watch.stop()
        clients = [self._client, *self._all_waiters]
        self._client, self._waiters, self._all_waiters = None, [], []
        for client in clients:
            if client is not None:
                with trio.CancelScope(shield=True), contextlib.suppress(glide.GlideError):
                    await client.close()

    @contextlib.contextmanager
    def reachable(self) -> Iterator[None]:
        """Turn glide's connection errors into `BackendUnavailable`.

        Refused credentials become `CredentialsRefused` (a `BackendUnavailable`
        too). Unlike coredis, glide reports a password changed under a running
        client as timeouts until it reconnects.
        """
        try:
            yield
        except BackendUnavailable:
            raise
        except (glide.ConnectionError, glide.TimeoutError, glide.ClosingError, OSError) as exc:
            detail = scrubbed(str(exc) or type(exc).__name__, self._url)
            if any(word in detail for word in CREDENTIAL_WORDS):
                raise CredentialsRefused(self.where, detail) from exc
            if no_database := self._no_database(detail):
                raise no_database from exc
            raise BackendUnavailable(self.where, detail) from exc
        except glide.RequestError as exc:
            detail = scrubbed(str(exc), self._url)
            if no_database := self._no_database(detail):
                raise no_database from exc
            if any(word in detail for word in CREDENTIAL_WORDS):
                raise CredentialsRefused(self.where, detail) from exc
            if says_any(detail, GLIDE_TRANSIENT):
                raise BackendUnavailable(self.where, detail) from exc
            if is_redirect(detail) and wants_cluster(self._url):
                # a blocking wait sent just before a failover or a slot move: the
                # cluster client learns the new owner, and the next call goes there
                raise BackendUnavailable(self.where, detail) from exc
            raise

    @contextlib.asynccontextmanager
    async def _explained(self, refusal: str | None = None) -> AsyncIterator[None]:
        """`reachable`, and when Redis seems unreachable, the reason a probe finds.

        With *refusal* (the command's name), an error reply of the server becomes
        `BackendRefused` (see `ConnectionBase._refusal`).

        glide says only "timed out" when a TLS handshake fails or a password was
        changed: the probe (`probe`, in a worker thread, at most once per
        `_PROBE_EVERY` seconds) finds the certificate error or the refused
        credentials, as coredis reports them.
        """
        try:
            with self.reachable():
                yield
        except CredentialsRefused:
            raise
        except BackendUnavailable as exc:
            better = await self._probe()
            if better is None or str(better) == str(exc):  # the watch's finding already
                raise
            raise better from exc
        except glide.RequestError as exc:
            if refusal is None:
                raise
            raise await self._refusal(refusal, exc) from exc

    async def _learn_nodes(self) -> None:
        """Ask the cluster for its nodes, at most once a minute; on a single server, nothing.

        A failure leaves what was known: a call that needs Redis says what is wrong.
        """
        if not wants_cluster(self._url) or trio.current_time() < self._known[1] + 60:
            return
        with trio.move_on_after(_LEARN_TIMEOUT), contextlib.suppress(glide.GlideError):
            reply = await self.client.custom_command(["CLUSTER", "NODES"])
            text = reply.decode() if isinstance(reply, bytes) else str(reply)
            if nodes := cluster_nodes(text):
                self._known = (nodes, trio.current_time())

    async def _probe(self, *, fresh: bool = False) -> BackendUnavailable | None:
        """What a probe finds wrong (None: nothing); its finding stands `_PROBE_EVERY` seconds.

        On a cluster, Redis is up while any node it named (or the URL names) answers.
        """
        now = trio.current_time()
        if fresh or now >= self._probed[0]:
            also = self._known[0]
            detail = await trio.to_thread.run_sync(
                lambda: probe(self._url, also=also), abandon_on_cancel=True
            )
            self._probed = (now + _PROBE_EVERY, detail)
        return self._finding()

    def _finding(self) -> BackendUnavailable | None:
        """The last probe's finding, an exception of its own for each caller (None: up)."""
        detail = self._probed[1]
        if detail is None:
            return None
        if any(word in detail for word in CREDENTIAL_WORDS):
            return CredentialsRefused(self.where, detail)
        return BackendUnavailable(self.where, detail)

    async def _is_down(self) -> bool:
        return await self._probe(fresh=True) is not None

    async def command(self, *args: str | bytes | float) -> Any:
        """One command of the user's: its reply as glide gives it (RESP3 types).

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
            BackendRefused: The server refused the command (its message).
        """
        words = [a if isinstance(a, str | bytes) else repr(a) for a in args]
        async with self._explained():
            try:
                return await self._watch.call(lambda: self.client.custom_command(words))
            except glide.RequestError as exc:
                if not server_said_no(exc):
                    raise  # reachable() says what it means
                raise user_refusal(self.where, args, scrubbed(str(exc), self._url)) from exc

    async def hash(self, key: str) -> dict[bytes, bytes]:
        """``HGETALL key``: the fields of one hash, empty when there is none."""
        async with self._explained("HGETALL"):
            return await self.client.hgetall(key)

    async def hashes(self, keys: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The fields of many hashes, in one round trip (a batch)."""
        if not keys:
            return []
        client = self.client
        async with self._explained("HGETALL"):
            cluster = isinstance(client, glide.GlideClusterClient)  # the keys share one slot
            batch = (glide.ClusterBatch if cluster else glide.Batch)(is_atomic=False)
            for key in keys:
                batch.hgetall(key)
            replies = await client.exec(batch, raise_on_error=True)
        return list(replies or [])

    async def list_items(self, key: str, start: int = 0, stop: int = -1) -> list[bytes]:
        """``LRANGE key start stop``: by default every element of a list, head first."""
        async with self._explained("LRANGE"):
            return list(await self.client.lrange(key, start, stop))

    async def exists(self, *keys: str) -> int:
        """``EXISTS``: how many of *keys* exist."""
        async with self._explained("EXISTS"):
            return await self.client.exists(list(keys))

    async def wait_replicas(self, count: int, server_wait: float) -> int:
        """``WAIT count server_wait`` on the queue's node: how many replicas have its writes.

        glide multiplexes one connection, so this counts every write made on it
        before, the queue's among them.
        """
        async with self._explained():
            reply = await self._on_queue_node(
                self.client, ["WAIT", str(count), str(int(server_wait * 1000))]
            )
        return int(reply)

    @contextlib.asynccontextmanager
    async def _waiting_client(self) -> AsyncIterator[Client]:
        """A client that makes no other request while the caller blocks on it."""
        if self._waiters:
            waiter = self._waiters.pop()
        else:
            self.client  # noqa: B018 - raises unless open
            await self._learn_nodes()
            with self.reachable():
                waiter = await new_client(self._url, self._known[0])
            self._all_waiters.append(waiter)
        try:
            yield waiter
        finally:
            if waiter in self._all_waiters:  # not closed meanwhile
                self._waiters.append(waiter)

    async def blmove(self, source: str, destination: str, block: float) -> bytes | None:
        """``BLMOVE source destination RIGHT LEFT block``, cancellable at once.

        The wait runs on a client of its own, in a shielded task. When the caller is
        cancelled, a ``CLIENT UNBLOCK`` from the main client ends it on the server,
        and an element moved before that landed is put back (the ``unmove`` script).

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """

        async def call(waiter: Client) -> Any:
            return await waiter.blmove(
                source, destination, glide.ListDirection.RIGHT, glide.ListDirection.LEFT, block
            )

        async with self._explained(), self._waiting_client() as waiter:
            reply = await self._wait_on(waiter, call, block, undo="unmove")
        assert reply is None or isinstance(reply, bytes)
        return reply

    async def wait_for_entries(self, streams: dict[str, str], block: float) -> None:
        """Return once a stream of *streams* has an entry after its id, or after *block* seconds.

        ``XREAD BLOCK``, which reads without taking: a cancelled wait changes nothing.

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """
        options = glide.StreamReadOptions(block_ms=max(1, round(block * 1000)), count=1)

        async def call(waiter: Client) -> Any:
            return await waiter.xread(streams, options)

        async with self._explained(), self._waiting_client() as waiter:
            await self._wait_on(waiter, call, block)

    async def _wait_on(
        self,
        waiter: Client,
        call: Callable[[Client], Awaitable[Any]],
        block: float,
        undo: str | None = None,
    ) -> Any:
        """Run the blocking *call* on *waiter*, cancellable at once; its reply.

        When the caller is cancelled, a ``CLIENT UNBLOCK`` ends the wait on the
        server, and a reply that came all the same is given to script *undo*.
        """
        async with self._explained():
            # read each time: a reconnect (or a failover) changes it
            client_id = int(await self._on_queue_node(waiter, ["CLIENT", "ID"]))
        box: dict[str, Any] = {}
        done = trio.Event()

        async def wait() -> None:
            with trio.CancelScope(shield=True):
                try:
                    box["reply"] = await call(waiter)
                except Exception as exc:  # handed to the caller below
                    box["error"] = exc
                finally:
                    done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            try:
                await done.wait()
            except trio.Cancelled:
                with trio.CancelScope(shield=True, deadline=trio.current_time() + IO_TIMEOUT):
                    # glide sends the command from its own thread: an UNBLOCK may reach
                    # the server first and find nothing to end, so it goes again until
                    # the wait is over
                    while not done.is_set():
                        if await self.unblock(client_id):
                            await done.wait()
                        else:
                            with trio.move_on_after(_UNBLOCK_AGAIN):
                                await done.wait()
                    if undo is not None and isinstance(box.get("reply"), bytes):
                        await self.run(undo, box["reply"])
                raise
        if "error" in box:
            error = box["error"]
            with self.reachable():
                if not (isinstance(error, glide.RequestError) and "OOM" in str(error)):
                    raise error
            # a full Redis refuses a blocking write: wait, then look again (as coredis)
            await trio.sleep(block)
            return None
        return box.get("reply")

    async def unblock(self, client_id: int) -> bool:
        """End the blocking wait of connection *client_id*; whether one was waiting.

        A refusal (e.g. NOPERM) is logged: the wait then ends by its own timeout.
        """
        try:
            reply = await self._on_queue_node(
                self.client, ["CLIENT", "UNBLOCK", str(client_id), "TIMEOUT"]
            )
        except glide.RequestError as exc:
            log_unblock_refused(exc)
            return False
        return bool(reply)

    async def _on_queue_node(self, client: Client, command: list[str | bytes]) -> Any:
        """*command* on the queue's node: on a cluster, routed to its slot's primary."""
        if isinstance(client, glide.GlideClusterClient):
            return await client.custom_command(command, self._slot_route)
        return await client.custom_command(command)

    async def _maxmemory(self) -> int:
        reply = await self._on_queue_node(self.client, ["CONFIG", "GET", "maxmemory"])
        return int(reply.get(b"maxmemory", b"0") or 0) if isinstance(reply, dict) else 0

    async def run(self, name: str, *args: str | bytes | float) -> Any:
        """Run script *name* with the shared head and *args*; its reply.

        A checkpoint: cancelled before it sends the script, it raises
        `trio.Cancelled` and changes nothing; once sent, it waits for the reply
        (at most the I/O timeout) so that a cancellation never hides a change.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time
                (then the script may or may not have run).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        client = self.client
        script = self._scripts[name]
        values = [v if isinstance(v, str | bytes) else repr(v) for v in (*self._head(), *args)]
        deadline = trio.current_time() + IO_TIMEOUT
        async with self._explained():
            with trio.CancelScope(shield=True, deadline=deadline):
                try:
                    return await self._watch.call(
                        lambda: client.invoke_script(script, keys=self._key_list, args=values)
                    )
                except glide.RequestError as exc:
                    if not server_said_no(exc):
                        raise  # reachable() says what it means
                    raise await self._refusal(f"the {name} script", exc) from exc
            raise BackendUnavailable(
                self.where, f"no reply to the {name} script within {IO_TIMEOUT}s"
            )
