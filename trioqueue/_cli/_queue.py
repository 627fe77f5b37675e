"""``trioqueue queue show|configure``: a Redis queue's shared settings, read and changed.

Every user of a queue follows the settings stored with it (capacity, mode, key
TTL), so commands that join a queue need none of them; this command shows them
and changes them in place, for the processes already running too.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import attrs

from .._backends.redis._url import redacted
from ._redis_args import redis_backend
from ._types import NotThere, UsageError, printable

if TYPE_CHECKING:
    import argparse

    from .._backends.redis._queue_settings import QueueSettings

__all__ = ["run_queue"]


async def run_queue(args: argparse.Namespace) -> int:
    """Show the queue's settings, or change the ones given; return the exit status."""
    changes = {
        "capacity": args.new_capacity,
        "reliable": None if args.new_mode is None else args.new_mode == "reliable",
        "key_ttl": args.new_key_ttl,
        "no_key_ttl": args.no_key_ttl,
    }
    given = args.no_key_ttl or any(
        value is not None for value in (args.new_capacity, args.new_mode, args.new_key_ttl)
    )
    if args.action == "show" and given:
        raise UsageError("`queue show` changes nothing: use `queue configure` to change settings")
    if args.action == "configure" and not given:
        raise UsageError(
            "nothing to change: give --capacity N, --mode reliable|simple, --key-ttl SECONDS "
            "or --no-key-ttl"
        )
    backend = redis_backend(args)
    async with backend:
        before = await backend.stored_settings()
        if before is None:
            raise NotThere(
                f"the queue {printable(args.queue)} does not exist yet on "
                f"{printable(redacted(args.redis))}: check --queue and the Redis URL (a queue is "
                "created with its settings by the first enqueue or worker)"
            )
        if args.action == "show":
            print(_shown(before, args.json))
            return 0
        after = await backend.configure(**changes)
    if args.json:
        print(_shown(after, True))
    else:
        print(f"{printable(args.queue)}: {_changed(before, after)}")
    print(
        "trioqueue queue: running workers and producers follow the new settings at once",
        file=sys.stderr,
    )
    return 0


def _shown(settings: QueueSettings, as_json: bool) -> str:
    if as_json:
        return json.dumps(attrs.asdict(settings))
    return settings.describe()


def _changed(before: QueueSettings, after: QueueSettings) -> str:
    """``capacity 100 -> 200`` for each setting that changed, or ``unchanged``."""
    pairs = zip(before.describe().split(", "), after.describe().split(", "), strict=True)
    said = [f"{old} -> {new.partition('=')[2]}" for old, new in pairs if old != new]
    return ", ".join(said) or f"unchanged ({after.describe()})"
