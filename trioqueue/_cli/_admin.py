"""Looking after a Redis queue: ``stats`` and ``dead`` (list, requeue, purge)."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._exceptions import JobNotFound
from .._metrics import COUNTER_NAMES
from .._queue import Queue
from .._record_json import record_json
from .._records import JobState
from .._scheduler import describe_marks
from ._redis_args import redis_backend
from ._table import print_table
from ._types import NotThere, UsageError, printable

if TYPE_CHECKING:
    import argparse

    from .._backends.redis._backend import RedisBackend
    from .._backends.redis._queue_info import QueueInfo
    from .._backends.redis._sharded import ShardedBackend
    from .._metrics import MetricsSnapshot

__all__ = ["run_dead", "run_stats"]


async def run_stats(args: argparse.Namespace) -> int:
    """Print what the queue holds and how fast it moves; with --watch, until interrupted."""
    backend = redis_backend(args)
    async with backend:
        await _check_queue_exists(args, backend)
        previous = await backend.stats()
        while True:
            await trio.sleep(args.interval)
            info, snap = await backend.inspect(), await backend.stats()
            marks = await backend.schedule_marks()
            rate = (snap.finished - previous.finished) / args.interval
            previous = snap
            schedules = describe_marks(marks, time.time())
            print(_stats_text(args, info, snap, rate, schedules), flush=True)
            if not args.watch:
                return 0


async def _check_queue_exists(
    args: argparse.Namespace, backend: RedisBackend | ShardedBackend
) -> None:
    """Refuse a queue this server has never seen (a mistyped name), before reading it.

    Every queue that was ever used has its settings key or its counters key; a
    sharded queue, on its first shard at least (the shards are used in turn).
    """
    from .._backends.redis._sharded import ShardedBackend

    shards = backend.shards if isinstance(backend, ShardedBackend) else (backend,)
    for shard in shards:
        keys = shard.keys
        if await shard._conn.exists(keys.config, keys.stats):
            return
    raise NotThere(
        f"the queue {printable(args.queue)}"
        + (f" with {len(shards)} shards" if len(shards) > 1 else "")
        + f" does not exist yet on {printable(shards[0]._conn.where)}: check --queue"
        + (" and --shards" if len(shards) > 1 else "")
        + " and the Redis URL (a queue exists once a job was enqueued to it or a worker "
        "ran on it)"
    )


def _levels_line(snap: MetricsSnapshot) -> list[str]:
    """The ready jobs by priority, when any waits at a level other than 0; else nothing."""
    levels = snap.gauges.ready_by_priority
    if not any(n for level, n in levels.items() if level):
        return []
    return [
        "ready by priority: "
        + ", ".join(f"{level:+d}: {n}" if level else f"0: {n}" for level, n in levels.items())
    ]


def _stats_text(
    args: argparse.Namespace,
    info: QueueInfo,
    snap: MetricsSnapshot,
    rate: float,
    schedules: list[dict[str, Any]],
) -> str:
    if args.json:
        counters = {name: getattr(snap, name) for name in COUNTER_NAMES}
        return json.dumps(
            {
                "queue": args.queue,
                **attrs.asdict(info),
                "ready_by_priority": {
                    str(level): n for level, n in snap.gauges.ready_by_priority.items()
                },
                "counters": counters,
                "per_second": rate,
                "schedules": schedules,
            }
        )
    oldest = "none" if info.oldest_claim_age is None else f"oldest {info.oldest_claim_age:.1f}s"
    return "\n".join(
        [
            f"queue {printable(args.queue)}: {info.ready} ready, {info.stored} stored for "
            f"lack of room, {info.processing} processing, {info.claims} claimed ({oldest}), "
            f"{info.dead} dead, {info.scheduled} scheduled for later, {info.deferred} waiting "
            f"for the jobs they run after, {info.finished_kept} finished records kept",
            *_levels_line(snap),
            "counters: " + ", ".join(f"{name}={getattr(snap, name)}" for name in COUNTER_NAMES),
            f"throughput: {rate:.1f} jobs/s finished over the last {args.interval:g}s",
            *(
                f"schedule {printable(s['name'])}: next tick {s['next_tick']}"
                + (" (overdue: is a scheduler running?)" if s["overdue"] else "")
                for s in schedules
            ),
        ]
    )


async def run_dead(args: argparse.Namespace) -> int:
    """List, show, requeue or purge dead letters."""
    if args.action == "list" and (args.job_id is not None or args.all):
        raise UsageError("dead list takes no job id; use `dead show ID` for one")
    if args.action in ("show", "requeue", "purge"):
        if (args.job_id is None) == (not args.all):
            raise UsageError(
                f"dead {args.action}: name one job id"
                + (", or pass --all" if args.action != "show" else "")
            )
        if args.action == "show" and args.all:
            raise UsageError("dead show takes one job id; use `dead list` for them all")
    backend = redis_backend(args)
    async with backend:
        return await _dead_action(args, backend)


async def _dead_action(args: argparse.Namespace, backend: RedisBackend | ShardedBackend) -> int:
    queue = Queue(backend)
    if args.action == "list":
        records = await queue.dead_letters()
        if not records and not args.json:
            print(f"trioqueue dead: no dead letters in {printable(args.queue)}", file=sys.stderr)
        if args.json:
            for record in records:
                print(json.dumps(record_json(record)))
            return 0
        rows = [
            (
                record.id,
                record.attempts,
                record.reason or "-",
                f"{record.last_error.type}: {record.last_error.message}"
                if record.last_error
                else "-",
            )
            for record in records
        ]
        print_table(("id", "attempts", "reason", "last error"), rows, headed=not args.no_header)
        return 0
    if args.action == "show":
        found = await queue.status(args.job_id)
        if found is None or found.state is not JobState.FAILED:
            raise JobNotFound(args.job_id, "dead letters")
        print(json.dumps(record_json(found), indent=2))
        return 0
    if args.action == "requeue":
        ids = [r.id for r in await queue.dead_letters()] if args.all else [args.job_id]
        if not ids:
            print(
                f"trioqueue dead: no dead letters in {printable(args.queue)}; nothing requeued",
                file=sys.stderr,
            )
        for job_id in ids:
            await queue.requeue_dead(job_id)
            print(f"{printable(job_id)} requeued")
        return 0
    purged = await queue.purge_dead(None if args.all else args.job_id)
    if not args.all and purged == 0:
        raise JobNotFound(args.job_id, "dead letters")
    print(f"purged {purged}")
    return 0
