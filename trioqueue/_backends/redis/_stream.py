"""What a stream source reads: a Redis stream, through one consumer group.

A `RedisBackend` given ``stream=`` and ``group=`` takes its jobs from a stream
instead of a list: new entries come through ``XREADGROUP`` as this process's
consumer, in the same script that claims them; finished jobs are acknowledged
(``XACK``, and ``XDEL`` if asked); entries another consumer of the group left
pending are taken over (``XAUTOCLAIM``). Everything after the claim (leases,
retries, dead letters, records) is the reliable queue's own machinery, kept under
the group's keys (``<stream>:<group>…``).
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Final

import attrs

from ..._exceptions import ConfigurationError

__all__ = ["StreamSource", "stream_options"]

_STARTS: Final = ("$", "0")


def default_consumer() -> str:
    """A consumer name of this process's own: host, process id and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@attrs.frozen
class StreamSource:
    """A stream source's identity: see `RedisBackend`'s *stream* arguments."""

    stream: str
    """The stream's key."""
    group: str
    """The consumer group this backend reads through; each group gets every entry."""
    consumer: str
    """This backend's consumer name in the group (one per process, by default)."""
    start: str = "$"
    """Where a group created by trioqueue starts: ``$`` (new entries) or ``0`` (all)."""
    delete_done: bool = False
    """Whether a finished job's entry is deleted (``XDEL``) as well as acknowledged."""

    def script_args(self) -> tuple[str, str, str, str]:
        """The head arguments the scripts take for a stream (see ``lua/prelude/1-queue.lua``)."""
        return self.group, self.consumer, self.start, "1" if self.delete_done else ""


def stream_options(
    queue: str | None,
    stream: str | None,
    group: str | None,
    start: str,
    consumer: str | None,
    delete_done: bool,
    *,
    given: dict[str, object],
) -> StreamSource | None:
    """The stream source `RedisBackend` was asked for, or None for a list queue.

    *given* holds the list-queue options that were set (not None): a stream has
    no capacity, mode, key TTL or processing keys, so each is refused.

    Raises:
        ConfigurationError: Neither or both of *queue* and *stream*, a stream without
            a group, a bad *start* or *consumer*, or a list-queue option with a stream.
    """
    if stream is None:
        if queue is None:
            raise ConfigurationError(
                "RedisBackend(...) needs queue='{jobs}' (a list queue), or stream='{uploads}' "
                "and group='workers' (a stream source)"
            )
        extra: dict[str, object] = {"group": group, "consumer": consumer}
        extra.update({"start": start} if start != "$" else {})
        extra.update({"delete_done": True} if delete_done else {})
        for name, value in extra.items():
            if value is not None:
                raise ConfigurationError(
                    f"RedisBackend(queue={queue!r}, {name}={value!r}): {name} belongs to a "
                    "stream source (stream=...); drop it, or read a stream instead of the list"
                )
        return None
    if queue is not None:
        raise ConfigurationError(
            f"RedisBackend(queue={queue!r}, stream={stream!r}): give one of them: a queue is a "
            "list, a stream source reads a stream"
        )
    if group is None:
        raise ConfigurationError(
            f"RedisBackend(stream={stream!r}): name the consumer group to read it through, "
            "e.g. group='thumbnailer' (it is created if missing)"
        )
    if start not in _STARTS:
        raise ConfigurationError(
            f"RedisBackend(start={start!r}): use '$' (a new group reads entries added from "
            "now on) or '0' (it reads the whole stream)"
        )
    for option, setting in given.items():
        if setting is not None:
            raise ConfigurationError(
                f"RedisBackend(stream={stream!r}, {option}={setting!r}): a stream source has no "
                f"{option}: {_WHY_NOT[option]}; drop it"
            )
    if consumer is not None and (not isinstance(consumer, str) or not consumer):
        raise ConfigurationError(
            f"RedisBackend(consumer={consumer!r}): name this process's consumer, or leave it "
            "None for one of its own"
        )
    return StreamSource(
        stream=stream,
        group=group,
        consumer=consumer if consumer is not None else default_consumer(),
        start=start,
        delete_done=bool(delete_done),
    )


_WHY_NOT: Final = {
    "capacity": "a stream takes every entry added (XADD never waits); bound it with "
    "XTRIM, knowing that trimming drops entries a group has not read",
    "reliable": "a stream source is always at-least-once (entries stay pending until done)",
    "key_ttl": "entries are deleted by acknowledgement (delete_done=True) or XTRIM, not expiry",
    "processing": "claimed entries stay in the group's pending list",
    "recovery_zset": "its claims set is the group's own (<stream>:<group>.claims)",
}
