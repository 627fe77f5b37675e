"""A TCP proxy between one client and Redis whose line a test can cut, hold and heal."""

from __future__ import annotations

import contextlib
import socket
import threading


class Line:
    """A TCP proxy between one worker and Redis, whose line can be cut and healed.

    Cut, its connections are dropped and new ones closed at once, as a network
    cut the worker notices; healed, new connections go through again. Held, it
    forwards nothing and closes nothing, as a partition the worker cannot tell from
    a slow server: what is sent meanwhile waits (as TCP retransmits it) and goes
    through once the line is released.
    """

    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/0"
        self.down = False
        self.lock = threading.Lock()
        self.sockets: set[socket.socket] = set()
        self.flowing = threading.Event()
        self.flowing.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                with self.lock:
                    if self.down:
                        raise OSError("cut")
                    upstream = socket.create_connection(("127.0.0.1", self.redis_port))
                    self.sockets |= {client, upstream}
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self.flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        self._drop(source, sink)

    def _drop(self, *pair: socket.socket) -> None:
        with self.lock:
            for sock in pair:
                self.sockets.discard(sock)
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def hold(self) -> None:
        """Forward nothing until `release`: every connection stays open and silent."""
        self.flowing.clear()

    def release(self) -> None:
        """Forward again, starting with what waited."""
        self.flowing.set()

    def cut(self) -> None:
        with self.lock:
            self.down = True
        self._drop(*list(self.sockets))

    def heal(self) -> None:
        with self.lock:
            self.down = False

    def close(self) -> None:
        self.release()
        self.cut()
        self.listener.close()
