"""One queue's slot of a Redis Cluster, on Trio's own sockets (see ``_resp.py``).

Every key of a queue hashes to one slot (its name's hash tag), so a queue's
connection needs one node: the master that serves that slot. A `SlotPool` lends
connections to it as a `RespPool` does to a single server, and follows what the
cluster answers:

- ``MOVED``: the slot is served elsewhere now (a failover, a finished move). The
  named node is its master from then on, and the command goes there at once.
- ``ASK``: the slot is being moved and the command's keys are on the importing
  node. The command goes there once, after ``ASKING``.
- ``TRYAGAIN``: a move is half-way for the command's keys. The command is sent
  again after a pause of 10 ms, doubling to 100 ms, for at most `TRYAGAIN_FOR`
  seconds; then the reply is the caller's, which takes it for an outage.
- A command of the user's on a key of another slot goes to the master of the
  queue's slot first; the ``MOVED`` it gets there is remembered, so the next
  command on that slot goes straight to its node.
- A node that cannot be reached: the request fails (`ConnectionLost`, an outage
  the pool waits out) and the next one asks the cluster again who serves the
  slot (``CLUSTER SLOTS``), so it reaches the promoted replica as soon as the
  cluster names it. The nodes are asked one after another within the request's
  deadline, the node that just failed last; a node that answers with an error
  (``LOADING``, ``NOAUTH``) is passed over for the next. The pools of nodes the
  cluster no longer names are closed.
- Over TLS, a node's certificate is checked against the name the cluster gives
  it (``cluster-announce-hostname``), or, when it announces only an address,
  against the host name of the URL: the certificate must name that host (or,
  for an address in the URL, that address).

A command answered ``MOVED``, ``ASK`` or ``TRYAGAIN`` did not run, which makes
sending it again safe; nothing else is sent again. The waits are ours: a
cluster client that waits a fixed 1.28 s before resending after ``TRYAGAIN``
(as valkey-glide's does) stops a queue that long on every slot move
(docs/redis-cluster.md).
"""

from __future__ import annotations

import collections
import contextlib
import ipaddress
import math
import re
from typing import TYPE_CHECKING, Any, Final, Protocol, final

import attrs
import trio

from ._resp import Arg, ConnectionLost, ReplyError, RespStream, encode
from ._resp_pool import MAX_CONNECTIONS, RespPool

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Callable, Sequence

    from ._url_parts import UrlParts

__all__ = ["TRYAGAIN_FOR", "Node", "SlotPool", "slot_master"]

Node = tuple[str, int]
"""A node's (host, port)."""

TRYAGAIN_FOR: Final = 2.0
"""Seconds a command answered ``TRYAGAIN`` is sent again before the reply is given up."""

_FIRST_PAUSE: Final = 0.01  # seconds before the first resend after TRYAGAIN
_LONGEST_PAUSE: Final = 0.1
_HOPS: Final = 5  # redirects followed for one command: more means the cluster is in flux
_ASKING: Final = encode("ASKING")
_REDIRECT: Final = re.compile(r"(?P<kind>MOVED|ASK) (?P<slot>\d+) (?P<host>\S*):(?P<port>\d+)")


class _Pool(Protocol):
    """What a `SlotPool` needs of the pool of one node (a `RespPool`)."""

    def connection(
        self, deadline: float = math.inf
    ) -> contextlib.AbstractAsyncContextManager[RespStream]: ...

    async def send_encoded(
        self, command: bytes, deadline: float = math.inf, *, blocking: bool = False
    ) -> Any: ...

    async def pipeline(
        self, commands: Sequence[Sequence[Arg] | bytes], deadline: float = math.inf
    ) -> list[Any]: ...

    async def aclose(self) -> None: ...


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def slot_master(reply: Sequence[Any], slot: int, asked: Node) -> tuple[Node | None, list[Node]]:
    """From a ``CLUSTER SLOTS`` reply: the master serving *slot*, and every node named.

    A node named without a host (Redis's "unknown endpoint") is on the host of
    the node *asked*.
    """
    master: Node | None = None
    nodes: list[Node] = []
    for entry in reply:
        first, last, *servers = entry
        for n, server in enumerate(servers):
            host = server[0].decode() if isinstance(server[0], bytes) else str(server[0])
            node = (host if host and host != "?" else asked[0], int(server[1]))
            nodes.append(node)
            if n == 0 and int(first) <= slot <= int(last):
                master = node
    return master, list(dict.fromkeys(nodes))


@final
class SlotPool:
    """Connections to the master of one slot of a Redis Cluster (see the module).

    Args:
        parts: The URL's credentials and options, and its seed nodes.
        tls: The TLS context for ``rediss://``; None for plain TCP.
        connect_timeout: Seconds a new connection may take, handshake included.
        slot: The slot the queue's keys hash to.
        max_connections: Connections to each node at most.
        open_pool: Makes the pool of one node (a test gives its own).
    """

    def __init__(
        self,
        parts: UrlParts,
        tls: ssl.SSLContext | None,
        connect_timeout: float,
        slot: int,
        max_connections: int = MAX_CONNECTIONS,
        open_pool: Callable[..., _Pool] = RespPool,
    ) -> None:
        self._parts = parts
        self._tls = tls
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._open_pool = open_pool
        self._failed: Node | None = None  # the node that failed last: asked last
        self.slot = slot
        self._seeds: list[Node] = list(parts.nodes) or [(parts.host, parts.port)]
        self._known: list[Node] = []  # as the cluster last named them, the one that did first
        self._pools: dict[Node, _Pool] = {}
        self._master: Node | None = None
        self._owners: dict[int, Node] = {}  # other slots' masters, as MOVED named them
        self._finding = trio.Lock()
        self._lent: dict[RespStream, Node] = {}
        self._closed = False
        self.followed: collections.Counter[str] = collections.Counter()
        """How many ``MOVED``, ``ASK`` and ``TRYAGAIN`` replies were followed."""

    def _pool(self, node: Node) -> _Pool:
        pool = self._pools.get(node)
        if pool is None:
            parts = attrs.evolve(self._parts, host=node[0], port=node[1])
            # the certificate names hosts: check it against the node's announced name,
            # or the URL's host when the cluster gives only an address
            tls_host = self._parts.host if _is_address(node[0]) else node[0]
            pool = self._pools[node] = self._open_pool(
                parts, self._tls, self._connect_timeout, self._max_connections, tls_host
            )
        return pool

    async def master(self, deadline: float = math.inf) -> Node:
        """The node serving the slot, asked of the cluster (by *deadline*) when not known.

        Raises:
            ConnectionLost: No node known answered.
            ReplyError: Every node that answered refused (the credentials, or
                ``CLUSTER SLOTS``); the first refusal.
        """
        if self._closed:
            raise ConnectionLost("the connection pool is closed")
        if self._master is not None:  # known: no lock, no yield (the request checkpoints)
            return self._master
        async with self._finding:  # one request asks; those waiting behind it take its answer
            if self._master is None:
                self._master = await self._find_master(deadline)
            return self._master

    def _candidates(self) -> list[Node]:
        """The nodes to ask, the one that failed last at the end."""
        nodes = list(dict.fromkeys([*self._known, *self._seeds]))
        if self._failed in nodes:
            nodes.remove(self._failed)
            nodes.append(self._failed)
        return nodes

    async def _find_master(self, deadline: float) -> Node:
        failures: list[str] = []
        refused: ReplyError | None = None
        for node in self._candidates():
            if trio.current_time() >= deadline:
                failures.append("out of time")
                break
            try:
                reply = await self._pool(node).send_encoded(encode("CLUSTER", "SLOTS"), deadline)
            except ConnectionLost as exc:
                failures.append(f"{node[0]}:{node[1]}: {exc}")
                continue
            if isinstance(reply, ReplyError):  # LOADING, NOAUTH, ...: the next may answer
                refused = refused or reply
                failures.append(f"{node[0]}:{node[1]}: {reply}")
                continue
            master, named = slot_master(reply, self.slot, node)
            self._known = [node, *(other for other in named if other != node)]
            await self._prune({*named, *self._seeds})
            if master is not None:
                return master
            failures.append(f"{node[0]}:{node[1]} says no node serves slot {self.slot}")
        if refused is not None:
            raise refused
        raise ConnectionLost("no node of the cluster answered (" + "; ".join(failures) + ")")

    async def _prune(self, named: set[Node]) -> None:
        """Close the pools of nodes the cluster no longer names."""
        for node in [node for node in self._pools if node not in named]:
            await self._pools.pop(node).aclose()

    def _lost(self, node: Node) -> None:
        """*node* failed: if it served the slot, the next request asks who does."""
        self._failed = node
        if self._master == node:
            self._master = None
        self._owners = {slot: owner for slot, owner in self._owners.items() if owner != node}

    async def send_encoded(
        self,
        command: bytes,
        slot: int | None = None,
        deadline: float = math.inf,
        *,
        blocking: bool = False,
    ) -> Any:
        """One encoded command's reply, sent where the slot is served (see the module).

        *slot*: that of the command's key, when it may be another than the queue's.

        Raises:
            ConnectionLost: The node serving the slot could not be reached, or the
                connection failed before the reply came.
        """
        node = self._owners.get(slot) if slot is not None else None
        node, asking = node or await self.master(deadline), False
        hops = 0
        pause, give_up = _FIRST_PAUSE, trio.current_time() + TRYAGAIN_FOR
        while True:
            try:
                if asking:
                    async with self._pool(node).connection(deadline) as stream:
                        stream.blocking = blocking
                        await stream.send(_ASKING + command, 2)
                        await stream.reply()  # +OK
                        reply = await stream.reply()
                else:
                    reply = await self._pool(node).send_encoded(
                        command, deadline, blocking=blocking
                    )
            except ConnectionLost:
                self._lost(node)
                raise
            if not isinstance(reply, ReplyError):
                return reply
            message = str(reply)
            if message.startswith("TRYAGAIN") and trio.current_time() < give_up:
                self.followed["TRYAGAIN"] += 1
                await trio.sleep(pause)
                pause = min(2 * pause, _LONGEST_PAUSE)
                continue
            found = _REDIRECT.match(message)
            if found is None or hops == _HOPS:
                return reply
            hops += 1
            self.followed[found["kind"]] += 1
            target = (found["host"] or node[0], int(found["port"]))
            asking = found["kind"] == "ASK"
            if not asking and int(found["slot"]) == self.slot:
                self._master = target
            elif not asking:
                self._owners[int(found["slot"])] = target
            node = target

    async def execute(
        self,
        *args: Arg,
        slot: int | None = None,
        deadline: float = math.inf,
        blocking: bool = False,
    ) -> Any:
        """One command's reply; an error reply is returned as a `ReplyError`, not raised.

        *slot*: as for `send_encoded`.

        Raises:
            ConnectionLost: The connection failed before the reply came.
        """
        return await self.send_encoded(encode(*args), slot, deadline, blocking=blocking)

    async def pipeline(
        self, commands: Sequence[Sequence[Arg] | bytes], deadline: float = math.inf
    ) -> list[Any]:
        """The replies of *commands* (argument lists, or encoded), sent together to the master.

        Error replies are values. From the first command answered ``MOVED``,
        ``ASK`` or ``TRYAGAIN`` on, the rest go again together (a script and the
        ``WAIT`` after it stay on one connection) to the node the cluster names.
        """
        encoded = [c if isinstance(c, bytes) else encode(*c) for c in commands]
        replies: list[Any] = []
        rest: list[Any] = []
        for _ in range(_HOPS + 1):
            node = await self.master(deadline)
            try:
                more = await self._pool(node).pipeline(encoded[len(replies) :], deadline)
            except ConnectionLost:
                self._lost(node)
                raise
            # the first command that did not run (redirected): it and the rest go again
            moved = next((i for i, r in enumerate(more) if self._redirected(r)), len(more))
            replies += more[:moved]
            rest = more[moved:]
            if not rest:
                return replies
            self.followed["pipeline"] += 1
            await trio.sleep(_FIRST_PAUSE)
        return [*replies, *rest]

    def _redirected(self, reply: Any) -> bool:
        return isinstance(reply, ReplyError) and self.heard(reply)

    @contextlib.asynccontextmanager
    async def connection(self, deadline: float = math.inf) -> AsyncIterator[RespStream]:
        """Lend a connection to the slot's master for the block (a blocking command).

        A reply on it that says the slot moved is the borrower's to report with
        `heard`.

        Raises:
            ConnectionLost: No connection could be made, or the pool is closed.
            ReplyError: The server refused the handshake.
        """
        node = await self.master(deadline)
        try:
            async with self._pool(node).connection(deadline) as stream:
                self._lent[stream] = node
                try:
                    yield stream
                finally:
                    del self._lent[stream]
        except ConnectionLost:
            self._lost(node)
            raise

    def heard(self, reply: ReplyError) -> bool:
        """Learn from a reply on a lent connection; whether it said the slot moved."""
        message = str(reply)
        found = _REDIRECT.match(message)
        if found is not None and found["kind"] == "MOVED" and int(found["slot"]) == self.slot:
            host = found["host"] or (self._master or self._seeds[0])[0]
            self._master = (host, int(found["port"]))
        return _moving(message)

    async def execute_beside(
        self, stream: RespStream, *args: Arg, deadline: float = math.inf
    ) -> Any:
        """`execute` on the node of the lent connection *stream* (``CLIENT UNBLOCK``)."""
        node = self._lent.get(stream)
        if node is None:
            return await self.execute(*args, deadline=deadline)
        return await self._pool(node).send_encoded(encode(*args), deadline)

    async def aclose(self) -> None:
        """Close every node's idle connections; lent ones close when given back."""
        self._closed = True
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.aclose()


def _moving(message: str) -> bool:
    """Whether an error reply means the slot is moving or moved (the command did not run)."""
    return message.startswith("TRYAGAIN") or _REDIRECT.match(message) is not None
