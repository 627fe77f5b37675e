"""Operating a Redis queue: ``enqueue``, ``stats`` and ``dead``.

Every command checks all of its input before it changes anything, so bad input
enqueues nothing half-way.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from ._backend import AddMode
from ._cli_args import NotThere, UsageError, printable, redis_backend
from ._exceptions import IdempotencyConflict, JobNotFound, QueueFull
from ._job_input import prepare
from ._metrics import COUNTER_NAMES
from ._queue import Queue
from ._record_json import iso_time, record_json
from ._records import JobState
from ._scheduler import describe_marks

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable

    from ._backend import NewJob, Receipt
    from ._backends.redis._backend import RedisBackend
    from ._backends.redis._queue_info import QueueInfo
    from ._backends.redis._sharded import ShardedBackend
    from ._metrics import MetricsSnapshot

__all__ = ["run_dead", "run_enqueue", "run_stats"]

EXIT_CONFLICTS: Final = 1
"""``enqueue``'s exit status when some jobs conflicted with existing ones."""

EXIT_REFUSED: Final = 1
"""``enqueue --no-wait``'s exit status when the queue was full."""

WAITING_REPORT_EVERY: Final = 3.0
"""Seconds between ``enqueue``'s lines while it waits for room in a full queue."""


# --- enqueue --------------------------------------------------------------------------


def _jobs_from_argument(args: argparse.Namespace) -> list[NewJob]:
    try:
        payload = json.loads(args.json)
    except ValueError as exc:
        raise UsageError(f'the job is not JSON ({exc}); quote it: \'{{"to": "a"}}\'') from None
    return [_prepared(payload, args.id, "the job", args)]


def _jobs_from_lines(
    lines: Iterable[bytes], id_key: str | None, args: argparse.Namespace
) -> list[NewJob]:
    jobs = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"line {number} is not UTF-8 ({exc}); nothing was enqueued") from None
        if not line.strip():
            continue
        try:
            payload = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"line {number} is not JSON ({exc}); nothing was enqueued") from None
        job_id = None
        if id_key is not None:
            job_id = payload.get(id_key) if isinstance(payload, dict) else None
            if not isinstance(job_id, str):
                raise UsageError(
                    f"line {number} has no string {id_key!r} for --id-key; nothing was enqueued"
                )
        jobs.append(_prepared(payload, job_id, f"line {number}", args))
    return jobs


def _prepared(payload: Any, job_id: str | None, where: str, args: argparse.Namespace) -> NewJob:
    try:
        return prepare(
            payload,
            job_id,
            delay=args.delay,
            at=args.at,
            max_attempts=args.max_attempts,
            handler_timeout=args.handler_timeout,
            task=args.task,
            priority=args.priority,
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}; nothing was enqueued") from None


@attrs.define
class _Tally:
    """How far an ``enqueue`` got, for the summary line."""

    total: int
    accepted: int = 0
    stored: int = 0
    scheduled: int = 0
    deduplicated: int = 0
    conflicts: int = 0
    waiting_since: float | None = None  # when the add under way started

    @property
    def done(self) -> int:
        return self.accepted + self.deduplicated + self.conflicts

    def summary(self, *, stopped: bool = False) -> str:
        text = (
            f"accepted {self.accepted}, deduplicated {self.deduplicated}, "
            f"conflicts {self.conflicts}"
        )
        if stopped:
            text += f", not sent {self.total - self.done}"
        if self.stored:
            text += f" ({self.stored} of the accepted stored until the queue has room)"
        if self.scheduled:
            text += f" ({self.scheduled} of the accepted scheduled for later)"
        return text


def _read_stdin(args: argparse.Namespace) -> list[NewJob]:
    if args.id is not None:
        raise UsageError(
            "--id names one job: give its JSON as an argument, or use --id-key with lines"
        )
    if sys.stdin.isatty():
        print(
            "trioqueue enqueue: reading one JSON payload per line from standard input; "
            "end with Ctrl-D",
            file=sys.stderr,
            flush=True,
        )
    return _jobs_from_lines(sys.stdin.buffer, args.id_key, args)


async def run_enqueue(args: argparse.Namespace) -> int:
    """Enqueue one job from the argument, or one per line of standard input."""
    if args.json is not None:
        if args.id_key is not None:
            raise UsageError("--id-key is for jobs read from standard input; use --id here")
        jobs = _jobs_from_argument(args)
    else:
        jobs = _read_stdin(args)
    backend = redis_backend(args)
    tally = _Tally(len(jobs))
    async with backend:
        try:
            async with trio.open_nursery() as nursery:
                if args.mode is AddMode.WAIT:
                    nursery.start_soon(_report_waiting, tally, backend)
                refused = await _send(args, backend, jobs, tally)
                nursery.cancel_scope.cancel()
        except BaseException as exc:  # interrupted, or Redis went away: say how far it got
            interrupted = isinstance(_leaf(exc), KeyboardInterrupt)
            if interrupted or (args.json is None and tally.done):
                print(tally.summary(stopped=True), flush=True)
                print("trioqueue enqueue: jobs with ids can be sent again safely", file=sys.stderr)
            raise
    if refused:
        print(tally.summary(stopped=True), flush=True)
        job = jobs[tally.done]
        print(
            f"trioqueue enqueue: the queue is full (capacity {backend.capacity}): "
            f"{tally.total - tally.done} not accepted, from job {printable(job.id)} on; "
            "send them again when workers have freed room, or leave out --no-wait to wait "
            "for it (--submit stores them until then)",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    if args.json is None:
        print(tally.summary())
    return EXIT_CONFLICTS if tally.conflicts else 0


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def _send(
    args: argparse.Namespace,
    backend: RedisBackend | ShardedBackend,
    jobs: list[NewJob],
    tally: _Tally,
) -> bool:
    """Add the jobs in order, counting them in *tally*; True if --no-wait found it full."""
    for job in jobs:
        tally.waiting_since = trio.current_time()
        try:
            receipt = await backend.add(job, args.mode)
        except IdempotencyConflict as exc:
            tally.conflicts += 1
            print(f"trioqueue enqueue: {printable(exc)}", file=sys.stderr)
            continue
        except QueueFull:
            return True
        finally:
            tally.waiting_since = None
        tally.deduplicated += receipt.deduplicated
        tally.accepted += not receipt.deduplicated
        fresh = not receipt.deduplicated
        tally.scheduled += fresh and receipt.scheduled
        tally.stored += fresh and not receipt.queued and not receipt.scheduled
        if args.json is not None:
            print(f"{printable(receipt.id)} {await _state_of(receipt, backend)}")
    return False


async def _state_of(receipt: Receipt, backend: RedisBackend | ShardedBackend) -> str:
    """What became of one job, for ``enqueue JSON``'s line."""
    if receipt.scheduled:
        record = await backend.status(receipt.id)
        due = record.due_at if record is not None else None
        when = "later" if due is None else iso_time(due)
        return ("already there, " if receipt.deduplicated else "") + f"scheduled for {when}"
    if receipt.deduplicated:
        return "already there"
    return "enqueued" if receipt.queued else "stored until the queue has room"


async def _report_waiting(tally: _Tally, backend: RedisBackend | ShardedBackend) -> None:
    """Every few seconds an add has waited, say why on stderr. Runs until cancelled."""
    while True:
        await trio.sleep(WAITING_REPORT_EVERY / 4)
        since = tally.waiting_since
        if since is None or trio.current_time() - since < WAITING_REPORT_EVERY:
            continue
        print(
            f"trioqueue enqueue: waiting for room: {tally.done} of {tally.total} enqueued, "
            f"the queue is full (capacity {backend.capacity}); workers free it",
            file=sys.stderr,
            flush=True,
        )
        await trio.sleep(WAITING_REPORT_EVERY * 3 / 4)


# --- stats ----------------------------------------------------------------------------


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
    from ._backends.redis._sharded import ShardedBackend

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
            f"{info.dead} dead, {info.scheduled} scheduled for later, {info.finished_kept} "
            "finished records kept",
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


# --- dead letters ---------------------------------------------------------------------


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
        for record in records:
            if args.json:
                print(json.dumps(record_json(record)))
            else:
                error = (
                    f"{record.last_error.type}: {record.last_error.message}"
                    if (record.last_error)
                    else "-"
                )
                fields = (record.id, f"attempts={record.attempts}", record.reason, error)
                print("\t".join(printable(field) for field in fields))
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
