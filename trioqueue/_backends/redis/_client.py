"""Which Redis client a backend's connection uses, and what it must offer.

For one server and for a Redis Cluster (``?cluster=yes``), hiredis: Trio's own
sockets with the hiredis parser, a round trip less than half of what glide's or
coredis's costs on Trio (docs/benchmarks.md), which follows a cluster's redirects
without the fixed waits of glide's cluster client (``_resp_cluster.py``). For
``wait_replicas``, valkey-glide (the ``redis`` extra installs both wherever glide
has a build); without hiredis, glide, and coredis where neither is installed.
``TRIOQUEUE_REDIS_CLIENT`` names one instead. Every connection keeps the same
meaning of errors (see `ConnectionBase`) and passes the same crash and outage tests.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..._exceptions import ConfigurationError
from ._url import check_url

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._keys import RedisKeys

__all__ = ["CLIENT_ENV", "Connection", "chosen_client", "connect"]

CLIENT_ENV: Final = "TRIOQUEUE_REDIS_CLIENT"
"""Names the Redis client: ``hiredis``, ``glide`` (valkey-glide) or ``coredis``; unset,
the best one installed for the URL."""

_CLIENTS: Final = {"hiredis": "hiredis", "glide": "valkey-glide", "coredis": "coredis"}
"""Each client's name and the distribution it needs."""
_INSTALL: Final = "pip install 'trioqueue[redis]' (in a checkout: pip install '.[redis]')"


class Connection(Protocol):
    """What the backend needs of its connection to Redis, whichever client makes it."""

    where: str
    """The URL without its password."""

    async def open(self) -> None:
        """Create the client; connecting happens on first use."""

    async def close(self) -> None:
        """Close the client."""

    async def hash(self, key: str) -> dict[bytes, bytes]:
        """``HGETALL key``."""

    async def hashes(self, keys: Sequence[str]) -> list[dict[bytes, bytes]]:
        """``HGETALL`` of each key, in one round trip."""

    async def list_items(self, key: str, start: int = 0, stop: int = -1) -> list[bytes]:
        """``LRANGE key start stop``: by default every element, head first."""

    async def exists(self, *keys: str) -> int:
        """``EXISTS keys...``."""

    async def blmove(self, source: str, destination: str, block: float) -> bytes | None:
        """``BLMOVE source destination RIGHT LEFT block``, cancellable at once."""

    async def wait_for_entries(self, streams: dict[str, str], block: float) -> None:
        """Return once a stream of *streams* has an entry after its id, or after *block* seconds."""

    async def unblock(self, client_id: int) -> bool:
        """End the blocking wait of connection *client_id*; whether one was waiting."""

    can_wait_replicas: bool
    """Whether `wait_replicas` counts the scripts' writes."""

    async def wait_replicas(self, count: int, server_wait: float) -> int:
        """``WAIT``: how many replicas have its writes (*server_wait*: the server's timer)."""

    async def run(self, name: str, *args: str | bytes | float) -> Any:
        """Run script *name* with the shared head and *args*."""

    async def command(self, *args: str | bytes | float) -> Any:
        """One command of the user's (`RedisBackend.command`): its reply."""


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def chosen_client(*, wait_replicas: bool = False) -> str:
    """The client a new connection uses: ``hiredis``, ``glide`` or ``coredis``.

    `CLIENT_ENV` when it names one. Else hiredis if it is installed, but for
    *wait_replicas*; then glide if it is installed (a cluster needs hiredis or
    glide); else coredis.

    Raises:
        ConfigurationError: `CLIENT_ENV` names another client.
    """
    name = os.environ.get(CLIENT_ENV, "").strip().lower()
    if name in _CLIENTS:
        return name
    if name:
        raise ConfigurationError(
            f"{CLIENT_ENV}={name!r}: use hiredis, glide or coredis, or unset it to use the "
            "best one installed"
        )
    if not wait_replicas and _installed("hiredis"):
        return "hiredis"
    return "glide" if _installed("glide") else "coredis"


def connect(
    url: str,
    keys: RedisKeys,
    head: Callable[[], Sequence[str | bytes | float]],
    *,
    wait_replicas: bool = False,
) -> Connection:
    """The connection for *url*, on the `chosen_client`.

    Raises:
        ConfigurationError: The URL is not valid, or `CLIENT_ENV` names another client.
        ImportError: The client is not installed (the message says what to install).
    """
    check_url(url)
    name = chosen_client(wait_replicas=wait_replicas)
    try:  # each client is imported only when chosen
        if name == "hiredis":
            from ._hiredis import HiredisConnection

            return HiredisConnection(url, keys, head)
        if name == "glide":
            from ._glide import GlideConnection

            return GlideConnection(url, keys, head)
        from ._coredis import CoredisConnection

        return CoredisConnection(url, keys, head)
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != name:
            raise  # not the client itself: a broken installation, say so as it is
        if os.environ.get(CLIENT_ENV, "").strip():
            raise ImportError(
                f"{CLIENT_ENV}={name} needs {_CLIENTS[name]}: pip install {_CLIENTS[name]}, "
                f"or unset {CLIENT_ENV} to use the client installed"
            ) from exc
        raise ImportError(f"trioqueue.RedisBackend needs a Redis client: {_INSTALL}") from exc
