"""The connection pool under the hiredis client: a connection goes back only whole.

A request cancelled or timed out before its reply leaves that reply on its way;
the connection must be closed, never lent again, or the next request would read
the old reply as its own. A server that closes a connection after a protocol
error must not get it lent again either.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import trio

from trioqueue._backends.redis._probe import url_parts
from trioqueue._backends.redis._resp import ReplyError, RespPool

if TYPE_CHECKING:
    from .redis_server import RedisServer


async def test_a_cancelled_request_never_hands_its_reply_to_the_next(redis_server: RedisServer):
    key = "resp-" + uuid.uuid4().hex
    pool = RespPool(url_parts(redis_server.url), None, connect_timeout=2)
    try:
        with trio.move_on_after(0.1):
            await pool.execute("BLPOP", key, 5)  # cancelled while the server waits
        await pool.execute("RPUSH", key, "late")  # the closed wait took nothing
        assert await pool.execute("GET", key + ":missing") is None  # not BLPOP's reply
        assert await pool.execute("LRANGE", key, 0, -1) == [b"late"]
    finally:
        await pool.execute("DEL", key)
        await pool.aclose()


async def test_a_connection_the_server_said_it_closes_is_not_lent_again(
    redis_server: RedisServer,
):
    pool = RespPool(url_parts(redis_server.url), None, connect_timeout=2)
    try:
        async with pool.connection() as stream:
            await stream.send(b"*x\r\n")  # a broken request: the server answers, then closes
            reply = await stream.reply()
            assert isinstance(reply, ReplyError)
            assert str(reply).startswith("ERR Protocol error")
            assert stream.broken
        assert await pool.execute("PING") == b"PONG"  # on a new connection
    finally:
        await pool.aclose()


async def test_an_error_reply_keeps_the_connection(redis_server: RedisServer):
    pool = RespPool(url_parts(redis_server.url), None, connect_timeout=2)
    try:
        async with pool.connection() as first:
            pass
        refused = await pool.execute("NOSUCHCOMMAND")
        assert isinstance(refused, ReplyError)
        async with pool.connection() as again:
            assert again is first  # lent again: its reply was read whole
    finally:
        await pool.aclose()
