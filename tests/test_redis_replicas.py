"""``wait_replicas``: an enqueue returns once replicas have the job, or says they do not.

Redis replicates after it replies, so a master that dies just after an enqueue
may take the job with it when a replica takes over. With ``wait_replicas=1`` an
enqueue waits (``WAIT``) until a replica has it. Real time: the wait is the
server's timer.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

import coredis
import pytest

import trioqueue
from trioqueue import Queue

from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def master_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    binary = find_server_binary()
    master = RedisServer(binary)
    master.start()
    replica = RedisServer(binary, extra=("--replicaof", "127.0.0.1", str(master.port)))
    try:
        replica.start()
        deadline = time.monotonic() + 10
        while b"master_link_status:up" not in info_replication(replica):
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.05)
        yield master, replica
    finally:
        replica.close()
        master.close()


def info_replication(server: RedisServer) -> bytes:
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
        sock.sendall(b"INFO replication\r\n")
        return sock.recv(65536)


async def test_an_enqueue_waits_for_a_replica_and_says_when_none_has_the_job(
    master_and_replica, monkeypatch
):
    master, replica = master_and_replica
    async with trioqueue.RedisBackend(
        master.url, queue="{r}", min_idle=30, wait_replicas=1
    ) as backend:
        queue = Queue(backend)
        assert await queue.enqueue("copied", id="a")  # the replica answers WAIT at once
        assert replica.process is not None
        os.kill(replica.process.pid, signal.SIGSTOP)  # a replica that stops copying
        try:
            started = time.monotonic()
            with pytest.raises(trioqueue.BackendUnavailable) as raised:
                await queue.enqueue("not copied", id="b")
            waited = time.monotonic() - started
        finally:
            os.kill(replica.process.pid, signal.SIGCONT)
        record = await queue.status("b")
    assert "jobs 1-1 of this call were stored, but only 0 of the 1 replicas" in str(raised.value)
    assert "enqueue them again with the same ids" in str(raised.value)
    assert 1.5 < waited < 5  # the 2 s WAIT, on the server's timer
    assert record is not None  # stored on the master: sent again, it is a duplicate
    async with coredis.Redis.from_url(replica.url) as client:
        deadline = time.monotonic() + 5
        while not await client.exists([backend.keys.job_prefix + "b"]):
            assert time.monotonic() < deadline, "the replica never caught up"


def test_wait_replicas_must_be_a_whole_number():
    with pytest.raises(trioqueue.ConfigurationError, match=r"wait_replicas=-1\): use a whole"):
        trioqueue.RedisBackend("redis://h/0", queue="{q}", min_idle=30, wait_replicas=-1)
