"""``trioqueue queue show|configure|pause|resume``: a Redis queue's shared settings.

Every user of a queue follows the settings stored with it (capacity, mode, key
TTL, paused), so commands that join a queue need none of them; this command shows
them and changes them in place, for the processes already running too.
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

    from .._backends.redis._backend import RedisBackend
    from .._backends.redis._queue_settings import QueueSettings
    from .._backends.redis._sharded import ShardedBackend

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
    if args.action != "configure" and given:
        raise UsageError(
            f"`queue {args.action}` takes no settings: use `queue configure` to change them"
        )
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
            print(_shown(before, args.json, await backend.is_paused()))
            return 0
        if args.action in ("pause", "resume"):
            return await _pause_or_resume(backend, args)
        after = await backend.configure(**changes)
        paused = await backend.is_paused()
    if args.json:
        print(_shown(after, True, paused))
    else:
        print(f"{printable(args.queue)}: {_changed(before, after)}")
    print(
        "trioqueue queue: running workers and producers follow the new settings at once",
        file=sys.stderr,
    )
    return 0


async def _pause_or_resume(backend: RedisBackend | ShardedBackend, args: argparse.Namespace) -> int:
    """Pause or resume the queue, and say what that means for its workers."""
    if args.action == "pause":
        await backend.pause()
        said = (
            "paused: workers finish the jobs they hold and claim none until "
            "`trioqueue queue resume`; producers may go on enqueueing"
        )
    else:
        await backend.resume()
        said = "resumed: workers claim again within their poll interval (1 s by default)"
    if args.json:
        print(json.dumps({"paused": args.action == "pause"}))
    else:
        print(f"{printable(args.queue)}: {said}")
    return 0


def _shown(settings: QueueSettings, as_json: bool, paused: bool) -> str:
    if as_json:
        return json.dumps({**attrs.asdict(settings), "paused": paused})
    return settings.describe() + (", paused" if paused else "")


def _changed(before: QueueSettings, after: QueueSettings) -> str:
    """``capacity 100 -> 200`` for each setting that changed, or ``unchanged``."""
    pairs = zip(before.describe().split(", "), after.describe().split(", "), strict=True)
    said = [f"{old} -> {new.partition('=')[2]}" for old, new in pairs if old != new]
    return ", ".join(said) or f"unchanged ({after.describe()})"
