"""``trioqueue queue show|configure|pause|resume|rate-limit``: a Redis queue's shared settings.

Every user of a queue follows the settings stored with it (capacity, mode, key
TTL, paused, rate limits), so commands that join a queue need none of them; this
command shows them and changes them in place, for the processes already running too.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import attrs

from .._backends.redis._url import redacted
from .._rate import RateLimits
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
    limits_given = args.new_rate is not None or args.new_per_key is not None
    if args.action != "configure" and given:
        raise UsageError(
            f"`queue {args.action}` takes no settings: use `queue configure` to change them"
        )
    if args.action != "rate-limit" and limits_given:
        raise UsageError(
            f"`queue {args.action}` takes no --rate or --per-key: use `queue rate-limit` to "
            "change the rate limits"
        )
    if args.action == "rate-limit" and not limits_given:
        raise UsageError(
            "no limit to change: give --rate LIMIT and/or --per-key LIMIT, each as STARTS/PER "
            "(e.g. 10/s) or 'none' to remove it"
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
            print(_shown(before, args.json, await backend.is_paused(), await backend.rate_limits()))
            return 0
        if args.action in ("pause", "resume"):
            return await _pause_or_resume(backend, args)
        if args.action == "rate-limit":
            return await _rate_limit(backend, args)
        after = await backend.configure(**changes)
        paused = await backend.is_paused()
        limits = await backend.rate_limits()
    if args.json:
        print(_shown(after, True, paused, limits))
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


async def _rate_limit(backend: RedisBackend | ShardedBackend, args: argparse.Namespace) -> int:
    """Replace the limits given ('none': remove it), keep the others, and say what holds now."""
    before = await backend.rate_limits()
    changes = {
        name: None if given == "none" else given
        for name, given in (("queue", args.new_rate), ("per_key", args.new_per_key))
        if given is not None
    }
    after = attrs.evolve(before, **changes)
    await backend.set_rate_limits(after)
    if args.json:
        print(json.dumps(after.as_json()))
    else:
        print(
            f"{printable(args.queue)}: rate limits {after.describe()}; every worker on the "
            "queue follows at once"
        )
    return 0


def _shown(settings: QueueSettings, as_json: bool, paused: bool, limits: RateLimits) -> str:
    if as_json:
        return json.dumps(
            {**attrs.asdict(settings), "paused": paused, "rate_limits": limits.as_json()}
        )
    shown = settings.describe() + (", paused" if paused else "")
    if limits != RateLimits():
        shown += f", rate limits {limits.describe()}"
    return shown


def _changed(before: QueueSettings, after: QueueSettings) -> str:
    """``capacity 100 -> 200`` for each setting that changed, or ``unchanged``."""
    pairs = zip(before.describe().split(", "), after.describe().split(", "), strict=True)
    said = [f"{old} -> {new.partition('=')[2]}" for old, new in pairs if old != new]
    return ", ".join(said) or f"unchanged ({after.describe()})"
