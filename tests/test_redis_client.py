"""Choosing the Redis client, and how a URL becomes a valkey-glide configuration.

Each connection's behaviour is the Redis tests' subject (``nox -s tests`` runs
them on hiredis, the cluster's on glide; ``nox -s tests_clients`` runs them on
glide and on coredis); these check what happens before any connection.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING

import pytest
import trio

import trioqueue
from trioqueue._backends.redis._client import CLIENT_ENV, chosen_client, connect
from trioqueue._backends.redis._connection import IO_TIMEOUT
from trioqueue._backends.redis._coredis import CoredisConnection
from trioqueue._backends.redis._glide import GlideConnection
from trioqueue._backends.redis._glide_config import cluster_nodes, glide_configuration
from trioqueue._backends.redis._hiredis import HiredisConnection
from trioqueue._backends.redis._keys import RedisKeys

from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from trioqueue import Queue

KEYS = RedisKeys.for_queue("{q}")


def head() -> list[str]:
    return []


def test_hiredis_serves_one_server_unless_the_environment_names_another(monkeypatch):
    monkeypatch.delenv(CLIENT_ENV, raising=False)
    assert isinstance(connect("redis://localhost/0", KEYS, head), HiredisConnection)
    assert isinstance(connect("unix:///run/redis.sock", KEYS, head), HiredisConnection)
    monkeypatch.setenv(CLIENT_ENV, " Coredis ")
    assert isinstance(connect("redis://localhost/0", KEYS, head), CoredisConnection)
    monkeypatch.setenv(CLIENT_ENV, "glide")
    assert isinstance(connect("redis://localhost/0", KEYS, head), GlideConnection)
    monkeypatch.setenv(CLIENT_ENV, "HIREDIS")
    assert isinstance(connect("redis://localhost/0", KEYS, head), HiredisConnection)


def test_a_cluster_gets_hiredis_and_waiting_for_replicas_glide(monkeypatch):
    monkeypatch.delenv(CLIENT_ENV, raising=False)
    cluster = connect("redis://localhost:7000?cluster=yes", KEYS, head)
    assert isinstance(cluster, HiredisConnection)
    monkeypatch.setenv(CLIENT_ENV, "glide")
    assert isinstance(connect("redis://localhost:7000?cluster=yes", KEYS, head), GlideConnection)
    monkeypatch.delenv(CLIENT_ENV)
    waiting = connect("redis://localhost/0", KEYS, head, wait_replicas=True)
    assert isinstance(waiting, GlideConnection)
    backend = trioqueue.RedisBackend("redis://localhost/0", queue="{q}", wait_replicas=1)
    assert isinstance(backend._conn, GlideConnection)


def test_the_hiredis_client_refuses_waiting_for_replicas(monkeypatch):
    monkeypatch.setenv(CLIENT_ENV, "hiredis")
    with pytest.raises(trioqueue.ConfigurationError, match=r"needs the valkey-glide client"):
        trioqueue.RedisBackend("redis://localhost/0", queue="{q}", wait_replicas=1)


def test_without_hiredis_glide_is_the_client(monkeypatch):
    monkeypatch.delenv(CLIENT_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "hiredis", None)  # as if not installed
    assert chosen_client() == "glide"
    assert isinstance(connect("redis://localhost/0", KEYS, head), GlideConnection)


def test_without_hiredis_and_glide_coredis_is_the_client(monkeypatch):
    monkeypatch.delenv(CLIENT_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "hiredis", None)
    monkeypatch.setitem(sys.modules, "glide", None)
    assert chosen_client() == "coredis"
    assert isinstance(connect("redis://localhost/0", KEYS, head), CoredisConnection)


def test_a_client_named_but_not_installed_is_named_in_the_error(monkeypatch):
    monkeypatch.setenv(CLIENT_ENV, "glide")
    monkeypatch.setitem(sys.modules, "glide", None)
    monkeypatch.delitem(sys.modules, "trioqueue._backends.redis._glide")
    monkeypatch.delitem(sys.modules, "trioqueue._backends.redis._glide_config")
    with pytest.raises(ImportError) as raised:
        trioqueue.RedisBackend("redis://localhost/0", queue="{q}")
    assert str(raised.value) == (
        "TRIOQUEUE_REDIS_CLIENT=glide needs valkey-glide: pip install valkey-glide, "
        "or unset TRIOQUEUE_REDIS_CLIENT to use the client installed"
    )


def test_an_unknown_client_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv(CLIENT_ENV, "redis-py")
    with pytest.raises(trioqueue.ConfigurationError) as raised:
        trioqueue.RedisBackend("redis://localhost/0", queue="{q}")
    assert str(raised.value) == (
        "TRIOQUEUE_REDIS_CLIENT='redis-py': use hiredis, glide or coredis, or unset it to use "
        "the best one installed"
    )


def test_a_url_gives_the_address_credentials_and_database():
    config = glide_configuration("redis://alice:p%40ss%23@example.com:6380/2")
    (address,) = config.addresses
    assert (address.host, address.port) == ("example.com", 6380)
    assert config.credentials is not None
    assert (config.credentials.username, config.credentials.password) == ("alice", "p@ss#")
    assert (config.database_id, config.use_tls, config.lazy_connect) == (2, False, True)
    assert config.request_timeout == 10_000  # glide's own default is 250 ms


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("redis://localhost:6379/0?password=s%26cret", "s&cret"),
        ("redis://:secret@localhost/0", "secret"),
        ("redis://secret@localhost/0", "secret"),  # a lone name is a password
    ],
)
def test_every_form_of_password_is_read(url, password):
    config = glide_configuration(url)
    assert config.credentials is not None
    assert config.credentials.password == password
    assert config.credentials.username is None


def test_no_password_means_no_credentials():
    config = glide_configuration("redis://localhost")
    (address,) = config.addresses
    assert (address.host, address.port, config.database_id) == ("localhost", 6379, 0)
    assert config.credentials is None


def test_a_cluster_url_gives_every_node_it_names_and_those_the_cluster_named():
    config = glide_configuration("redis://a:7000,b:7001?cluster=yes", [("c", 7002), ("a", 7000)])
    assert [(node.host, node.port) for node in config.addresses] == [
        ("a", 7000),
        ("b", 7001),
        ("c", 7002),
    ]


def test_cluster_nodes_are_read_from_cluster_nodes_without_the_failed_ones():
    reply = (
        "07c3 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n"
        "67ed 10.0.0.2:7001@17001,node-2.example master - 0 1 2 connected 5461-10922\n"
        "292f 10.0.0.3:7002@17002 master,fail - 0 1 3 disconnected\n"
        "824f :0@0 slave,noaddr 292f 0 1 3 disconnected\n"
        "6ec2 [::1]:7004@17004 slave 07c3 0 1 1 connected\n"
    )
    assert cluster_nodes(reply) == [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7004)]


def test_a_unix_socket_url_gives_its_path_and_database():
    config = glide_configuration("unix:///run/redis/redis.sock?db=3")
    (address,) = config.addresses
    assert address.unix_socket_path == "/run/redis/redis.sock"
    assert config.database_id == 3


def test_tls_options_are_read_from_the_url(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    config = glide_configuration(f"rediss://localhost:6380/0?ssl_ca_certs={ca}")
    assert config.use_tls
    assert config.advanced_config is not None
    tls = config.advanced_config.tls_config
    assert tls is not None
    assert tls.root_pem_cacerts == ca.read_bytes()
    assert not tls.use_insecure_tls
    insecure = glide_configuration("rediss://localhost:6380/0?ssl_cert_reqs=none")
    assert insecure.advanced_config is not None
    assert insecure.advanced_config.tls_config is not None
    assert insecure.advanced_config.tls_config.use_insecure_tls


def test_turning_off_only_the_host_name_check_is_refused_with_what_to_do():
    with pytest.raises(trioqueue.ConfigurationError) as raised:
        glide_configuration("rediss://127.0.0.1:6380/0?ssl_check_hostname=false")
    assert "connect by a name the certificate holds" in str(raised.value)
    assert "?ssl_cert_reqs=none" in str(raised.value)


def test_an_unreadable_ca_file_is_a_configuration_error(tmp_path: Path):
    missing = tmp_path / "missing.pem"
    with pytest.raises(trioqueue.ConfigurationError) as raised:
        glide_configuration(f"rediss://localhost:6380/0?ssl_ca_certs={missing}")
    assert "?ssl_ca_certs=" in str(raised.value)
    assert "give the path of a PEM file" in str(raised.value)


@contextlib.asynccontextmanager
async def glide_queue_whose_redis_died(monkeypatch) -> AsyncIterator[tuple[RedisServer, Queue]]:
    """A queue on glide that reached its private Redis once; the server is then killed."""
    monkeypatch.setenv(CLIENT_ENV, "glide")
    server = RedisServer(find_server_binary())
    server.start()
    try:
        async with trioqueue.RedisBackend(server.url, queue="{down}", min_idle=30) as backend:
            queue = trioqueue.Queue(backend)
            await queue.enqueue("before")  # connected
            server.stop(kill=True)
            yield server, queue
    finally:
        server.close()


async def test_on_glide_a_call_while_redis_is_down_fails_instead_of_waiting(monkeypatch):
    # glide holds a request sent while it reconnects until the server is back; the
    # connection must say "unavailable" meanwhile, or a pool never sees the outage
    async with glide_queue_whose_redis_died(monkeypatch) as (server, queue):
        started = time.monotonic()
        with pytest.raises(trioqueue.BackendUnavailable) as raised:
            await queue.enqueue("during")
        waited = time.monotonic() - started
        assert "Connection refused" in str(raised.value)  # what the probe found
        # one liveness period and a probe, not the 10 s I/O timeout
        assert waited < IO_TIMEOUT / 2
        server.start()
        assert await queue.enqueue("after")


async def test_on_glide_the_backend_is_back_soon_after_a_restarted_redis(monkeypatch):
    # glide's own reconnect backoff grows while the server is away: after 3 s it
    # answered 2.3-2.5 s after the server did, past the one more lease a sweep
    # grants after an outage, so live jobs were recovered and ran twice
    async with glide_queue_whose_redis_died(monkeypatch) as (server, queue):
        with pytest.raises(trioqueue.BackendUnavailable):
            await queue.enqueue("during")
        await trio.sleep(3)  # the server's absence is the subject: real time
        server.start()
        back = time.monotonic()
        assert await queue.enqueue("after")
        assert time.monotonic() - back < 1.0  # 0.2-0.25 s measured; 1.6-2.3 s before


@pytest.mark.parametrize(
    ("url", "becomes"),
    [
        ("redis://127.0.0.1:1/0?cluster=yes", trioqueue.BackendUnavailable),
        ("redis://127.0.0.1:1/0", None),  # a single-server client: not an outage
    ],
)
def test_a_redirect_that_reaches_a_blocking_wait_on_a_cluster_is_an_outage(url, becomes):
    """A BLMOVE sent just before a failover gets MOVED: the pool backs off and goes
    on (glide learns the new owner), instead of stopping on the error."""
    import glide

    connection = GlideConnection(url, RedisKeys.for_queue("{q}"), list)
    moved = glide.RequestError("An error was signalled by the server: - Moved: 5730 h:25773")
    with pytest.raises(becomes or glide.RequestError) as raised, connection.reachable():
        raise moved
    assert (raised.value is moved) == (becomes is None)


@pytest.mark.parametrize(
    "message",
    [
        "TryAgain: Multiple keys request during rehashing of slot",
        "An error was signalled by the server - TRYAGAIN",
        "Moved: 12495 127.0.0.1:7001",
        "ASK 12495 127.0.0.1:7002",
        "ClusterDown: The cluster is down",
    ],
)
async def test_on_a_cluster_a_redirect_or_try_again_is_an_outage_not_a_hand_changed_key(message):
    import glide

    connection = GlideConnection("redis://127.0.0.1:7000?cluster=yes", KEYS, head)
    refusal = await connection._refusal("the claim script", glide.RequestError(message))
    assert type(refusal) is trioqueue.BackendUnavailable  # waited out, and not "by hand"
    assert "changed by hand" not in str(refusal)


async def test_on_one_server_a_redirect_still_says_to_add_cluster_yes():
    connection = HiredisConnection("redis://127.0.0.1:7000", KEYS, head)
    refusal = await connection._refusal("the claim script", Exception("MOVED 12495 h:7001"))
    assert isinstance(refusal, trioqueue.ConfigurationError)
    assert "add ?cluster=yes to the URL" in str(refusal)
