"""`SlotPool`: one slot's master, found and followed through MOVED, ASK, TRYAGAIN and failover.

The nodes here are fakes that answer as Redis Cluster does; the real cluster's
tests are in ``tests/test_redis_cluster.py``. Time is Trio's mock clock, so the
pauses are exact.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

import hiredis
import pytest
import trio

from trioqueue._backends.redis._resp import ConnectionLost, ReplyError
from trioqueue._backends.redis._resp_cluster import TRYAGAIN_FOR, SlotPool, slot_master
from trioqueue._backends.redis._url_parts import url_parts

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

SLOT = 1234
A, B, C = ("10.0.0.1", 7000), ("10.0.0.2", 7000), ("10.0.0.3", 7000)

Answer = Any  # a reply, or a ReplyError


class FakeStream:
    """One connection to a fake node: what is sent is answered in order."""

    def __init__(self, node: FakeNode) -> None:
        self.node = node
        self._reader = hiredis.Reader()
        self._replies: list[Answer] = []
        self._asking = False
        self.blocking = False

    async def send(self, data: bytes, replies: int = 1) -> None:
        await trio.lowlevel.checkpoint()
        self.node.check_up()
        self._reader.feed(data)
        while (words := self._reader.gets()) is not False:
            if words == [b"ASKING"]:
                self._asking = True
                self._replies.append(b"OK")
                continue
            self._replies.append(self.node.answer(words, asking=self._asking))
            self._asking = False

    async def reply(self) -> Answer:
        await trio.lowlevel.checkpoint()
        return self._replies.pop(0)

    async def round_trip(self, command: bytes) -> Answer:
        await self.send(command)
        return await self.reply()


class FakeNode:
    """A cluster node: *answer* says what it replies to each command."""

    def __init__(self, address: tuple[str, int], cluster: FakeCluster) -> None:
        self.address = address
        self.cluster = cluster
        self.seen: list[tuple[str, bool]] = []  # (command, asking)
        self.up = True
        self.closed = False

    def check_up(self) -> None:
        if not self.up:
            raise ConnectionLost(f"connection to {self.address} refused")

    def answer(self, words: list[bytes], *, asking: bool) -> Answer:
        name = b" ".join(words[:2] if words[0] == b"CLUSTER" else words[:1]).decode()
        self.seen.append((name, asking))
        if name == "CLUSTER SLOTS":
            return self.cluster.slots()
        return self.cluster.reply(self, words, asking)

    # the _Pool protocol
    @contextlib.asynccontextmanager
    async def connection(self, deadline: float = math.inf) -> AsyncIterator[FakeStream]:
        self.check_up()
        yield FakeStream(self)

    async def send_encoded(
        self, command: bytes, deadline: float = math.inf, *, blocking: bool = False
    ) -> Answer:
        return await FakeStream(self).round_trip(command)

    async def pipeline(self, commands: list[bytes], deadline: float = math.inf) -> list[Answer]:
        stream = FakeStream(self)
        await stream.send(b"".join(commands), len(commands))
        return [await stream.reply() for _ in commands]

    async def aclose(self) -> None:
        self.closed = True


class FakeCluster:
    """Three fake nodes; *master* serves `SLOT`; *rule* answers the other commands."""

    def __init__(self, rule: Callable[[FakeNode, list[bytes], bool], Answer]) -> None:
        self.nodes = {address: FakeNode(address, self) for address in (A, B, C)}
        self.master = A
        self.rule = rule
        self.tls_hosts: dict[tuple[str, int], str | None] = {}

    def slots(self) -> list[Any]:
        others = [n for n in self.nodes if n != self.master]
        host, port = self.master
        return [
            [0, SLOT - 1, [others[0][0].encode(), others[0][1], b"id"]],
            [SLOT, SLOT, [host.encode(), port, b"id"], [others[1][0].encode(), others[1][1]]],
            [SLOT + 1, 16383, [others[1][0].encode(), others[1][1], b"id"]],
        ]

    def reply(self, node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        return self.rule(node, words, asking)

    def pool(
        self, parts: Any, tls: Any, timeout: float, most: int, tls_host: str | None
    ) -> FakeNode:
        self.tls_hosts[(parts.host, parts.port)] = tls_host
        return self.nodes[(parts.host, parts.port)]


def slot_pool(cluster: FakeCluster, url: str = "redis://10.0.0.2:7000?cluster=yes") -> SlotPool:
    return SlotPool(url_parts(url), None, 2.0, SLOT, open_pool=cluster.pool)


def commands(node: FakeNode, name: str = "GET") -> list[tuple[str, bool]]:
    return [seen for seen in node.seen if seen[0] == name]


async def test_the_slots_master_is_asked_of_the_urls_node_then_served():
    cluster = FakeCluster(lambda node, words, asking: b"value")
    pool = slot_pool(cluster)  # the URL names B; A serves the slot
    assert await pool.execute("GET", "{q}") == b"value"
    assert await pool.execute("GET", "{q}") == b"value"
    assert cluster.nodes[B].seen == [("CLUSTER SLOTS", False)]  # asked once
    assert commands(cluster.nodes[A]) == [("GET", False)] * 2


async def test_tryagain_is_sent_again_after_10_ms_doubling_to_100_ms(autojump_clock):
    refusals = 6

    def rule(node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        nonlocal refusals
        if refusals:
            refusals -= 1
            return ReplyError("TRYAGAIN Multiple keys request during rehashing of slot")
        return b"done"

    pool = slot_pool(FakeCluster(rule))
    await pool.master()
    start = trio.current_time()
    assert await pool.execute("EVALSHA", "x", 2, "{q}", "{q}.b") == b"done"
    assert trio.current_time() - start == pytest.approx(0.01 + 0.02 + 0.04 + 0.08 + 0.1 + 0.1)
    assert pool.followed["TRYAGAIN"] == 6


async def test_tryagain_for_longer_than_the_limit_is_the_callers_reply(autojump_clock):
    pool = slot_pool(FakeCluster(lambda node, words, asking: ReplyError("TRYAGAIN moving")))
    await pool.master()
    start = trio.current_time()
    reply = await pool.execute("GET", "{q}")
    assert isinstance(reply, ReplyError)
    assert str(reply).startswith("TRYAGAIN")
    assert TRYAGAIN_FOR <= trio.current_time() - start <= TRYAGAIN_FOR + 0.1


async def test_moved_goes_to_the_new_master_at_once_and_stays_there(autojump_clock):
    def rule(node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        if node.address == A:
            return ReplyError(f"MOVED {SLOT} 10.0.0.3:7000")
        return b"here"

    cluster = FakeCluster(rule)
    pool = slot_pool(cluster)
    await pool.master()
    start = trio.current_time()
    assert await pool.execute("GET", "{q}") == b"here"
    assert await pool.execute("GET", "{q}") == b"here"
    assert trio.current_time() == start  # no wait
    assert commands(cluster.nodes[A]) == [("GET", False)]  # only the first went there
    assert commands(cluster.nodes[C]) == [("GET", False)] * 2
    assert pool.followed["MOVED"] == 1


async def test_moved_for_another_slot_is_followed_once_and_the_slots_master_kept():
    def rule(node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        if words[1] == b"other" and node.address == A:
            return ReplyError("MOVED 99 10.0.0.2:7000")  # a user's command on another key
        return node.address[0].encode()

    cluster = FakeCluster(rule)
    pool = slot_pool(cluster)
    assert await pool.execute("GET", "other") == b"10.0.0.2"
    assert await pool.execute("GET", "{q}") == b"10.0.0.1"


async def test_a_slot_another_node_serves_is_learned_from_moved_and_then_gone_to_directly():
    def rule(node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        if words[1] == b"other" and node.address != B:
            return ReplyError("MOVED 99 10.0.0.2:7000")
        return node.address[0].encode()

    cluster = FakeCluster(rule)
    pool = slot_pool(cluster)
    for _ in range(3):
        assert await pool.execute("GET", "other", slot=99) == b"10.0.0.2"
    assert commands(cluster.nodes[A]) == [("GET", False)]  # the first only
    assert commands(cluster.nodes[B]) == [("GET", False)] * 3
    cluster.nodes[B].up = False  # B dies: slot 99 is asked of the queue's master again
    with pytest.raises(ConnectionLost):
        await pool.execute("GET", "other", slot=99)
    assert await pool.execute("GET", "{q}", slot=99) == b"10.0.0.1"


async def test_ask_sends_the_command_once_to_the_importing_node_after_asking():
    def rule(node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        if node.address == A and words[1] == b"{q}.moved":
            return ReplyError(f"ASK {SLOT} 10.0.0.3:7000")
        return b"ok" if node.address == A or asking else ReplyError(f"MOVED {SLOT} 10.0.0.1:7000")

    cluster = FakeCluster(rule)
    pool = slot_pool(cluster)
    assert await pool.execute("GET", "{q}.moved") == b"ok"
    assert await pool.execute("GET", "{q}") == b"ok"  # the slot is still A's
    assert commands(cluster.nodes[C]) == [("GET", True)]
    assert commands(cluster.nodes[A]) == [("GET", False)] * 2
    assert pool.followed["ASK"] == 1


async def test_a_dead_master_is_an_error_and_the_next_call_finds_the_promoted_replica():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    pool = slot_pool(cluster)
    assert await pool.execute("GET", "{q}") == b"10.0.0.1"
    cluster.nodes[A].up = False
    with pytest.raises(ConnectionLost):
        await pool.execute("GET", "{q}")
    # before the failover, the cluster still names A: the call fails again
    with pytest.raises(ConnectionLost):
        await pool.execute("GET", "{q}")
    cluster.master = C  # the replica is promoted
    assert await pool.execute("GET", "{q}") == b"10.0.0.3"


async def test_once_known_the_cluster_is_found_without_the_urls_node():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    pool = slot_pool(cluster)  # the URL names B alone
    assert await pool.execute("GET", "{q}") == b"10.0.0.1"
    cluster.nodes[B].up = False
    cluster.nodes[A].up = False
    cluster.master = C
    with pytest.raises(ConnectionLost):
        await pool.execute("GET", "{q}")
    assert await pool.execute("GET", "{q}") == b"10.0.0.3"  # C said so: B was not needed


async def test_no_node_answering_names_every_node_tried():
    cluster = FakeCluster(lambda node, words, asking: b"")
    for node in cluster.nodes.values():
        node.up = False
    pool = slot_pool(cluster, "redis://10.0.0.2:7000,10.0.0.3:7000?cluster=yes")
    with pytest.raises(ConnectionLost, match=r"10\.0\.0\.2:7000: .*refused.*10\.0\.0\.3:7000"):
        await pool.execute("GET", "{q}")


async def test_from_a_piped_command_the_slot_move_refused_on_the_rest_go_again(autojump_clock):
    tried: set[bytes] = set()

    def rule(node: FakeNode, words: list[bytes], asking: bool) -> Answer:
        if words[1] == b"{q}.b" and words[1] not in tried:
            tried.add(words[1])
            return ReplyError("TRYAGAIN moving")
        return words[1]

    cluster = FakeCluster(rule)
    pool = slot_pool(cluster)
    replies = await pool.pipeline([("GET", "{q}.a"), ("GET", "{q}.b"), ("GET", "{q}.c")])
    assert replies == [b"{q}.a", b"{q}.b", b"{q}.c"]
    assert [name for name, _ in cluster.nodes[A].seen].count("GET") == 5  # a once, b, c twice


async def test_a_moved_heard_on_a_lent_connection_moves_the_next_call():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    pool = slot_pool(cluster)
    async with pool.connection() as stream:
        assert stream.node.address == A
    assert pool.heard(ReplyError(f"MOVED {SLOT} 10.0.0.3:7000"))
    assert not pool.heard(ReplyError("ERR wrong number of arguments"))
    assert await pool.execute("GET", "{q}") == b"10.0.0.3"


async def test_client_unblock_goes_to_the_node_of_the_waiting_connection():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    pool = slot_pool(cluster)
    async with pool.connection() as stream:
        pool.heard(ReplyError(f"MOVED {SLOT} 10.0.0.3:7000"))  # the slot moved meanwhile
        assert await pool.execute_beside(stream, "CLIENT", "UNBLOCK", 7) == b"10.0.0.1"


def test_the_slots_master_is_read_from_cluster_slots_a_missing_host_the_asked_nodes():
    reply = [
        [0, 99, [b"", 7001, b"id1"], [b"10.0.0.9", 7004, b"id4"]],
        [100, 16383, [b"10.0.0.2", 7002, b"id2"]],
    ]
    assert slot_master(reply, 50, ("10.0.0.7", 7000)) == (
        ("10.0.0.7", 7001),
        [("10.0.0.7", 7001), ("10.0.0.9", 7004), ("10.0.0.2", 7002)],
    )
    assert slot_master(reply, 100, ("h", 1))[0] == ("10.0.0.2", 7002)
    assert slot_master([], 100, ("h", 1)) == (None, [])


async def test_a_node_that_answers_an_error_is_passed_over_for_the_next():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    loading = cluster.nodes[B]
    loading.answer = lambda words, asking: ReplyError("LOADING Redis is loading")  # type: ignore[method-assign]
    pool = slot_pool(cluster, "redis://10.0.0.2:7000,10.0.0.3:7000?cluster=yes")
    assert await pool.execute("GET", "{q}") == b"10.0.0.1"  # C named A as the master


async def test_every_node_refusing_gives_the_first_refusal():
    cluster = FakeCluster(lambda node, words, asking: b"")
    for node in cluster.nodes.values():
        node.answer = lambda words, asking: ReplyError("NOAUTH Authentication required.")  # type: ignore[method-assign]
    pool = slot_pool(cluster, "redis://10.0.0.2:7000,10.0.0.3:7000?cluster=yes")
    with pytest.raises(ReplyError, match="NOAUTH"):
        await pool.execute("GET", "{q}")


async def test_the_node_that_just_failed_is_asked_last():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    pool = slot_pool(cluster, "redis://10.0.0.1:7000?cluster=yes")
    assert await pool.execute("GET", "{q}") == b"10.0.0.1"
    cluster.nodes[A].up = False
    with pytest.raises(ConnectionLost):
        await pool.execute("GET", "{q}")  # the master died
    cluster.master = B  # a replica took over
    for node in cluster.nodes.values():
        node.seen.clear()
    assert await pool.execute("GET", "{q}") == b"10.0.0.2"
    assert cluster.nodes[A].seen == []  # A, first known and dead, was not tried first


async def test_the_pools_of_nodes_the_cluster_no_longer_names_are_closed():
    cluster = FakeCluster(lambda node, words, asking: node.address[0].encode())
    pool = slot_pool(cluster, "redis://10.0.0.2:7000?cluster=yes")
    await pool.execute("GET", "{q}")
    stray = ("10.0.0.9", 7000)
    cluster.nodes[stray] = FakeNode(stray, cluster)
    pool._pool(stray)  # a node once named, gone from the cluster since
    pool._lost(A)
    await pool.execute("GET", "{q}")
    assert cluster.nodes[stray].closed
    assert not cluster.nodes[A].closed


async def test_over_tls_a_node_announced_by_address_is_checked_against_the_urls_host():
    cluster = FakeCluster(lambda node, words, asking: b"")
    cluster.nodes[("redis-b.example", 7000)] = FakeNode(("redis-b.example", 7000), cluster)
    pool = slot_pool(cluster, "redis://10.0.0.2:7000?cluster=yes")
    named = slot_pool(cluster, "redis://cache.example:7000,10.0.0.2:7000?cluster=yes")
    pool._pool(A)
    named._pool(A)
    named._pool(("redis-b.example", 7000))
    assert cluster.tls_hosts[A] == "cache.example"  # the last made: the URL's host name
    assert cluster.tls_hosts[("redis-b.example", 7000)] == "redis-b.example"
