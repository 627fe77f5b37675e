"""A Redis queue's shared settings: what every user of the queue follows.

The first script that writes to a queue stores them in ``<queue>.config``; every
script after that reads them from there. A `RedisBackend` left without a
setting follows the stored one, and one given a setting that disagrees is
refused when it connects, with every difference named at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from ..._exceptions import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DEFAULT_CAPACITY", "QueueSettings", "agreed_settings", "decode_settings"]

DEFAULT_CAPACITY: Final = 1000
"""A new queue's capacity when none is given."""


@attrs.frozen
class QueueSettings:
    """The settings every user of a Redis queue shares (`RedisBackend.settings`)."""

    capacity: int = DEFAULT_CAPACITY
    """Most jobs on the ready list."""
    reliable: bool = True
    """True for at-least-once delivery with recovery; False for a simple queue."""
    key_ttl: float | None = None
    """Seconds an unfed queue lives; None for ever."""

    def describe(self) -> str:
        """``capacity=100, mode=reliable, key_ttl=None``: as the command line shows them."""
        mode = "reliable" if self.reliable else "simple"
        return f"capacity={self.capacity}, mode={mode}, key_ttl={self.key_ttl}"

    def script_args(self) -> tuple[int, str, str]:
        """Capacity, mode and key TTL as the scripts take them (``''`` = no TTL)."""
        ttl = "" if self.key_ttl is None else repr(float(self.key_ttl))
        return self.capacity, "reliable" if self.reliable else "simple", ttl


def decode_settings(fields: Sequence[bytes | None]) -> QueueSettings | None:
    """The stored capacity, mode and key TTL, or None when the queue has none yet."""
    capacity, mode, key_ttl = fields
    if capacity is None:
        return None
    return QueueSettings(
        capacity=int(capacity),
        reliable=mode != b"simple",
        key_ttl=float(key_ttl) if key_ttl else None,
    )


def agreed_settings(
    queue: str,
    stored: QueueSettings | None,
    *,
    capacity: int | None,
    reliable: bool | None,
    key_ttl: float | None,
) -> QueueSettings:
    """The settings a backend works with: the stored ones, or for a new queue its own.

    Raises:
        ConfigurationError: A setting given disagrees with the stored one; every
            difference is named, with how to follow or change the queue's.
    """
    if stored is None:
        return QueueSettings(
            capacity=DEFAULT_CAPACITY if capacity is None else capacity,
            reliable=True if reliable is None else reliable,
            key_ttl=key_ttl,
        )
    differences = []
    if capacity is not None and capacity != stored.capacity:
        differences.append(f"capacity={stored.capacity} (yours: {capacity})")
    if reliable is not None and reliable != stored.reliable:
        theirs, yours = ("reliable", "simple") if stored.reliable else ("simple", "reliable")
        differences.append(f"mode={theirs} (yours: {yours})")
    if key_ttl is not None and float(key_ttl) != stored.key_ttl:
        differences.append(f"key_ttl={stored.key_ttl} (yours: {float(key_ttl)})")
    if differences:
        raise ConfigurationError(
            f"queue {queue!r} is set up with {', '.join(differences)}: leave these settings "
            "out to follow the queue's, or change the queue's with `trioqueue queue "
            "configure` (RedisBackend.configure)"
        )
    return stored
