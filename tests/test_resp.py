"""Our Redis client's connection pool: what a cancelled, cut or silent request leaves.

A request cancelled after it was sent leaves its reply on the way: the pool reads
it off in a task of its own and lends the connection again, so the next request
never reads the old reply as its own and a cancellation costs no new connection.
A command that may block on the server is closed instead (that ends its wait). A
send cut half-way, a server that closes, or one that never answers: the
connection is closed. The pool is bounded, and serves waiters in order.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import random
import socket
import uuid
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue._backends.redis._resp import CLIENT_NAME, NoReply, ReplyError, encode
from trioqueue._backends.redis._resp_pool import DRAIN_TIMEOUT, IDLE_LIMIT, RespPool
from trioqueue._backends.redis._url_parts import url_parts
from trioqueue._io_deadline import io_deadline

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .redis_cluster import RedisCluster
    from .redis_server import RedisServer


def pool_for(url: str, most: int = 64) -> RespPool:
    return RespPool(url_parts(url), None, connect_timeout=2, max_connections=most)


async def drained(pool: RespPool) -> None:
    """Wait until no connection of *pool* is being drained (each drain is bounded)."""
    with trio.fail_after(DRAIN_TIMEOUT + 5):
        while pool._background:  # noqa: ASYNC110 - the drains are system tasks of the pool
            await trio.sleep(0.001)


async def test_a_cancelled_blocking_command_is_closed_and_takes_nothing_later(
    redis_server: RedisServer,
):
    key = "resp-" + uuid.uuid4().hex
    pool = pool_for(redis_server.url)
    try:
        with trio.move_on_after(0.1):
            await pool.execute("BLPOP", key, 5, blocking=True)  # cancelled while it waits
        await drained(pool)
        await pool.execute("RPUSH", key, "late")  # the closed wait took nothing
        assert await pool.execute("GET", key + ":missing") is None  # not BLPOP's reply
        assert await pool.execute("LRANGE", key, 0, -1) == [b"late"]
    finally:
        await pool.execute("DEL", key)
        await pool.aclose()


async def test_a_request_cancelled_after_it_was_sent_keeps_its_connection(
    redis_server: RedisServer,
):
    pool = pool_for(redis_server.url)
    try:
        for n in range(20):
            with trio.CancelScope() as scope:
                async with pool.connection() as stream:
                    await stream.send(encode("ECHO", f"old-{n}"))
                    scope.cancel()
                    await stream.reply()  # cancelled before the reply was read
            assert scope.cancelled_caught
            await drained(pool)
            assert await pool.execute("ECHO", f"new-{n}") == f"new-{n}".encode()
        assert pool.opened == 1  # one connection, drained and lent again 20 times
        assert pool.drained == 20
    finally:
        await pool.aclose()


async def test_a_request_cancelled_before_it_was_sent_leaves_the_connection_sound(
    redis_server: RedisServer,
):
    pool = pool_for(redis_server.url)
    try:
        assert await pool.execute("PING") == b"PONG"
        for _ in range(20):
            with trio.CancelScope() as scope:
                scope.cancel()
                await pool.execute("ECHO", "never sent")
            assert scope.cancelled_caught
            async with pool.connection() as stream:
                assert not stream.unsound
                assert stream.owed == 0
        assert pool.opened == 1
        assert pool.drained == 0  # nothing was owed: no drain either
    finally:
        await pool.aclose()


async def test_a_connection_its_caller_stopped_waiting_for_is_made_and_lent_later(nursery):
    answered = trio.Event()

    async def answer(stream: trio.SocketStream) -> None:
        await read_command(stream)
        await answered.wait()  # the handshake's reply comes after the caller has gone
        await stream.send_all(b"+OK\r\n")
        while True:
            await read_command(stream)
            await stream.send_all(b"+PONG\r\n")

    server = FakeServer(answer)
    pool = pool_for(await server.start(nursery))
    with trio.move_on_after(0.05) as scope:
        await pool.execute("PING")
    assert scope.cancelled_caught
    answered.set()
    await drained(pool)  # the pool's own task finished the connection and kept it
    assert pool.open_connections == 1
    assert await pool.execute("PING") == b"PONG"
    assert server.accepted == 1
    assert pool.opened == 1
    await pool.aclose()


async def test_a_connection_the_server_said_it_closes_is_not_lent_again(
    redis_server: RedisServer,
):
    pool = pool_for(redis_server.url)
    try:
        async with pool.connection() as stream:
            await stream.send(b"*x\r\n")  # a broken request: the server answers, then closes
            reply = await stream.reply()
            assert isinstance(reply, ReplyError)
            assert str(reply).startswith("ERR Protocol error")
            assert stream.unsound
        assert await pool.execute("PING") == b"PONG"  # on a new connection
        await drained(pool)
        assert pool.opened == 2
    finally:
        await pool.aclose()


async def test_an_error_reply_keeps_the_connection(redis_server: RedisServer):
    pool = pool_for(redis_server.url)
    try:
        async with pool.connection() as first:
            pass
        refused = await pool.execute("NOSUCHCOMMAND")
        assert isinstance(refused, ReplyError)
        async with pool.connection() as again:
            assert again is first  # lent again: its reply was read whole
    finally:
        await pool.aclose()


async def a_storm(
    call: Callable[[str], Awaitable[object]], *, tasks: int, calls: int, seed: int
) -> tuple[int, list[tuple[str, object]]]:
    """*calls* calls of *call* from *tasks* tasks, each under a deadline of 0-5 ms
    but one in eight, which has none (so that however slow the machine, calls
    return between the cancelled ones, on the connections those left).

    Returns how many returned, and every reply that was not its own call's token.
    """
    rng = random.Random(seed)
    deadlines = [math.inf if n % 8 == 0 else rng.uniform(0, 0.005) for n in range(calls)]
    returned, wrong = 0, []

    async def one_task(first: int) -> None:
        nonlocal returned
        for n in range(first, calls, tasks):
            token = f"{first}:{n}"
            with trio.move_on_after(deadlines[n]):
                reply = await call(token)
                returned += 1
                if reply != token.encode() and reply != [token.encode()] * 3:
                    wrong.append((token, reply))

    async with trio.open_nursery() as nursery:
        for first in range(tasks):
            nursery.start_soon(one_task, first)
    return returned, wrong


def storm_calls(backend: trioqueue.RedisBackend) -> list[Callable[[str], Awaitable[object]]]:
    """A storm's two calls: one command, and a pipeline of three (its token each time)."""

    async def command(token: str) -> object:
        return await backend.command("ECHO", token)

    async def pipeline(token: str) -> object:
        return await backend._conn.client.pipeline([("ECHO", token)] * 3)

    return [command, pipeline]


@pytest.mark.parametrize("seed", [1, 2])
async def test_under_random_deadlines_every_reply_is_its_own_requests(
    redis_server: RedisServer, seed: int
):
    async with trioqueue.RedisBackend(redis_server.url, queue="{storm}") as backend:
        pool = backend._conn.client
        assert isinstance(pool, RespPool)
        for call in storm_calls(backend):
            returned, wrong = await a_storm(call, tasks=64, calls=2_000, seed=seed)
            assert wrong == []  # a reply never reaches another caller
            assert returned >= 2_000 // 8  # the calls without a deadline, at least
        # a cancellation costs no connection: at most one per task, made once (before,
        # each cancelled call closed its own, and thousands were made)
        assert pool.opened <= 64
        assert pool.drained > 0
        await drained(pool)
        assert pool.open_connections <= pool.max_connections  # bounded through the storm
        assert await backend.command("PING") == b"PONG"  # and answering afterwards


async def test_on_a_cluster_too_every_reply_is_its_own_requests(redis_cluster: RedisCluster):
    url = redis_cluster.url + "?cluster=yes"
    async with trioqueue.RedisBackend(url, queue="{storm}") as backend:
        for call in storm_calls(backend):
            returned, wrong = await a_storm(call, tasks=32, calls=1_000, seed=3)
            assert wrong == []
            assert returned >= 1_000 // 8
        assert await backend.command("PING") == b"PONG"


class FakeServer:
    """A TCP server that answers each command with what the test's *answer* does."""

    def __init__(self, answer: Callable[[trio.SocketStream], Awaitable[None]]) -> None:
        self.answer = answer
        self.accepted = 0

    async def serve(self, stream: trio.SocketStream) -> None:
        self.accepted += 1
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.answer(stream)

    async def start(self, nursery: trio.Nursery) -> str:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), self.serve, 0
        )
        port = listeners[0].socket.getsockname()[1]
        return f"redis://127.0.0.1:{port}/0"


async def read_command(stream: trio.SocketStream) -> bytes:
    data = await stream.receive_some(65536)
    if not data:
        raise trio.ClosedResourceError
    return bytes(data)


async def handshake(stream: trio.SocketStream) -> None:
    """Answer the pool's CLIENT SETNAME."""
    await read_command(stream)
    await stream.send_all(b"+OK\r\n")


async def test_a_reply_cut_half_way_is_read_whole_and_a_cancelled_one_drained(nursery):
    async def answer(stream: trio.SocketStream) -> None:
        await handshake(stream)
        while True:
            await read_command(stream)
            await stream.send_all(b"$11\r\nhello")
            await trio.sleep(0.05)  # the rest comes later
            await stream.send_all(b" world\r\n")

    server = FakeServer(answer)
    pool = pool_for(await server.start(nursery))
    assert await pool.execute("GET", "k") == b"hello world"
    with trio.move_on_after(0.01):  # cancelled between the two halves
        await pool.execute("GET", "k")
    await drained(pool)
    assert await pool.execute("GET", "k") == b"hello world"  # its own, not the cut one
    assert server.accepted == 1
    await pool.aclose()


async def test_a_server_that_closes_mid_reply_is_a_lost_connection_then_a_new_one(nursery):
    async def answer(stream: trio.SocketStream) -> None:
        await handshake(stream)
        await read_command(stream)
        await stream.send_all(b"$11\r\nhel")
        await stream.aclose()

    server = FakeServer(answer)
    url = await server.start(nursery)
    async with trioqueue.RedisBackend(url, queue="{q}") as backend:
        for attempt in (1, 2):
            with pytest.raises(trioqueue.BackendUnavailable, match="closed the connection"):
                await backend.command("GET", "k")
            assert server.accepted == attempt  # each on a connection of its own


async def test_a_server_that_never_answers_fails_by_the_deadline(nursery, autojump_clock):
    async def answer(stream: trio.SocketStream) -> None:
        await handshake(stream)
        await trio.sleep_forever()

    url = await FakeServer(answer).start(nursery)
    async with trioqueue.RedisBackend(url, queue="{q}") as backend:
        started = trio.current_time()
        with pytest.raises(trioqueue.BackendUnavailable, match=r"no reply .* within 10 s"):
            await backend.command("GET", "k")
        assert trio.current_time() - started == pytest.approx(10)
        pool = backend._conn.client
        assert isinstance(pool, RespPool)
        await drained(pool)  # the drain gave up too: the connection is closed
        assert pool.open_connections == 0


async def test_a_script_ends_by_the_callers_io_deadline_not_a_longer_one_of_its_own(
    nursery, autojump_clock
):
    async def answer(stream: trio.SocketStream) -> None:
        await handshake(stream)
        await trio.sleep_forever()

    url = await FakeServer(answer).start(nursery)
    async with trioqueue.RedisBackend(url, queue="{q}") as backend:
        backend._adopted = True  # no settings to read first
        started = trio.current_time()
        with (
            trio.CancelScope(shield=True, deadline=started + 3),
            io_deadline(started + 3),
            pytest.raises(trioqueue.BackendUnavailable, match=r"the settle script within 3 s"),
        ):
            await backend._conn.run("settle")
        assert trio.current_time() - started == pytest.approx(3)


async def test_the_pool_is_bounded_and_serves_waiters_in_order(redis_server: RedisServer):
    pool = pool_for(redis_server.url, most=1)
    order: list[int] = []
    release = trio.Event()

    async def hold() -> None:
        async with pool.connection():
            await release.wait()

    async def wait(n: int) -> None:
        async with pool.connection():
            order.append(n)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()
            for n in range(5):
                nursery.start_soon(wait, n)
                await trio.testing.wait_all_tasks_blocked()
            assert order == []  # all wait for the one connection
            assert pool.open_connections == 1
            release.set()
        assert order == [0, 1, 2, 3, 4]  # first come, first served
        assert pool.opened == 1
    finally:
        await pool.aclose()


async def test_no_connection_freeing_by_the_deadline_is_an_error_saying_so(
    redis_server: RedisServer, autojump_clock
):
    pool = pool_for(redis_server.url, most=1)
    autojump_clock.autojump_threshold = math.inf  # a real connection: no jump while it is made
    try:
        async with pool.connection():
            autojump_clock.autojump_threshold = 0  # then 5 s of waiting pass at once
            with pytest.raises(NoReply, match=r"all 1 connections to .* stayed busy"):
                await pool.execute("PING", deadline=trio.current_time() + 5)
    finally:
        await pool.aclose()


async def test_an_idle_connection_the_server_closed_is_not_lent(redis_server: RedisServer):
    pool = pool_for(redis_server.url)
    try:
        own_id = await pool.execute("CLIENT", "ID")  # the one connection, idle again
        with socket.create_connection(("127.0.0.1", redis_server.port), timeout=5) as other:
            other.sendall(encode("CLIENT", "KILL", "ID", own_id))
            assert other.recv(100) == b":1\r\n"  # as a server's `timeout` would
        await trio.sleep(1.1)  # idle long enough to be checked before it is lent
        assert await pool.execute("PING") == b"PONG"  # no "connection closed" error
        assert pool.opened == 2
    finally:
        await pool.aclose()


async def test_a_connection_idle_past_the_limit_is_closed(redis_server: RedisServer, monkeypatch):
    pool = pool_for(redis_server.url)
    try:
        await pool.execute("PING")
        (stream,) = pool._idle
        stream.idle_since -= IDLE_LIMIT + 1
        await pool.execute("PING")
        assert pool.opened == 2
    finally:
        await pool.aclose()


async def test_connections_have_keepalive_and_a_name(redis_server: RedisServer):
    pool = pool_for(redis_server.url)
    try:
        async with pool.connection() as stream:
            raw = stream._stream
            assert isinstance(raw, trio.SocketStream)
            assert raw.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert await stream.request("CLIENT", "GETNAME") == CLIENT_NAME.encode()
    finally:
        await pool.aclose()


async def test_a_refused_client_unblock_is_logged_once_and_never_replaces_the_cancellation(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch
):
    async with trioqueue.RedisBackend(redis_server.url, queue="{u}") as backend:
        conn = backend._conn
        real = conn._reply

        async def no_unblock(*args: object, **options: object) -> object:
            if args[:2] == ("CLIENT", "UNBLOCK"):
                return ReplyError("NOPERM this user has no permissions to run 'client|unblock'")
            return await real(*args, **options)  # type: ignore[arg-type]

        monkeypatch.setattr(conn, "_reply", no_unblock)
        caplog.set_level(logging.WARNING, "trioqueue.redis")
        for _ in range(3):
            with trio.move_on_after(0.05) as scope:
                await conn.blmove("{u}:empty", "{u}:elsewhere", 0.3)
            assert scope.cancelled_caught  # the caller's cancellation, not an error
        assert caplog.text.count("could not end a wait for jobs at once") == 1


async def test_a_failing_clean_up_of_a_cancelled_wait_never_replaces_the_cancellation(
    redis_server: RedisServer, monkeypatch
):
    async with trioqueue.RedisBackend(redis_server.url, queue="{u}") as backend:
        conn = backend._conn

        async def broken(*args: object) -> object:
            raise trioqueue.BackendUnavailable(conn.where, "the line broke")

        monkeypatch.setattr(conn, "_unblocked", broken)
        with trio.move_on_after(0.05) as scope:
            await conn.blmove("{u}:empty", "{u}:elsewhere", 5)
        assert scope.cancelled_caught
