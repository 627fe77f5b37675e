"""The private Redis fixture itself: found, started on a free port, restartable."""

from __future__ import annotations

import socket

from .redis_server import RedisServer, find_server_binary


def test_a_private_server_starts_on_a_free_port_and_survives_a_restart_with_its_data():
    server = RedisServer(find_server_binary(), appendonly=True)
    try:
        server.start()
        assert server.port != 6379
        assert server.ping()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"SET k v\r\n")
            assert sock.recv(16) == b"+OK\r\n"
        server.restart()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"GET k\r\n")
            assert sock.recv(16) == b"$1\r\nv\r\n"  # appendonly kept it
        server.stop(kill=True)
        assert not server.ping()
    finally:
        server.close()
