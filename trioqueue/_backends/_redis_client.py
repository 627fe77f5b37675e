"""Which Redis client a backend's connection uses, and what it must offer.

coredis by default; valkey-glide (experimental, issue 14) when the environment
says ``TRIOQUEUE_REDIS_CLIENT=glide``. Both connections keep the same meaning of
errors (see `RedisConnection`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._exceptions import ConfigurationError
from ._redis_connection import RedisConnection

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._redis_keys import RedisKeys

__all__ = ["CLIENT_ENV", "Connection", "connect"]

CLIENT_ENV: Final = "TRIOQUEUE_REDIS_CLIENT"
"""Names the Redis client: ``coredis`` (the default) or ``glide`` (valkey-glide, experimental)."""


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

    async def list_items(self, key: str) -> list[bytes]:
        """``LRANGE key 0 -1``."""

    async def exists(self, *keys: str) -> int:
        """``EXISTS keys...``."""

    async def blmove(self, source: str, destination: str, block: float) -> bytes | None:
        """``BLMOVE source destination RIGHT LEFT block``, cancellable at once."""

    async def unblock(self, client_id: int) -> bool:
        """End the blocking wait of connection *client_id*; whether one was waiting."""

    async def run(self, name: str, *args: str | bytes | float) -> Any:
        """Run script *name* with the shared head and *args*."""


def connect(
    url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
) -> Connection:
    """The connection for *url*, on the client `CLIENT_ENV` names (coredis by default).

    Raises:
        ConfigurationError: `CLIENT_ENV` names another client, or glide is not installed.
    """
    name = os.environ.get(CLIENT_ENV, "coredis").strip().lower() or "coredis"
    if name == "coredis":
        return RedisConnection(url, keys, head)
    if name != "glide":
        raise ConfigurationError(
            f"{CLIENT_ENV}={name!r}: use coredis (the default) or glide, or unset it"
        )
    try:
        from ._redis_glide import GlideConnection  # imports glide: only when chosen
    except ImportError as exc:
        raise ConfigurationError(
            f"{CLIENT_ENV}=glide needs valkey-glide: pip install valkey-glide, or unset "
            f"{CLIENT_ENV} to use coredis"
        ) from exc
    return GlideConnection(url, keys, head)
