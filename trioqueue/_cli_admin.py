"""Operating a Redis queue: ``enqueue``, ``stats`` and ``dead``.

Every command checks all of its input before it changes anything, so bad input
enqueues nothing half-way.
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from ._backend import AddMode
from ._cli_args import UsageError, printable, redis_backend
from ._exceptions import IdempotencyConflict, JobNotFound
from ._metrics import COUNTER_NAMES
from ._queue import Queue, prepare
from ._records import JobState

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable

    from ._backend import NewJob
    from ._backends._queue_info import QueueInfo
    from ._backends._redis import RedisBackend
    from ._metrics import MetricsSnapshot
    from ._records import JobRecord

__all__ = ["run_dead", "run_enqueue", "run_stats"]

EXIT_CONFLICTS: Final = 1
"""``enqueue``'s exit status when some jobs conflicted with existing ones."""


# --- enqueue --------------------------------------------------------------------------


def _jobs_from_argument(args: argparse.Namespace) -> list[NewJob]:
    try:
        payload = json.loads(args.json)
    except ValueError as exc:
        raise UsageError(f'the job is not JSON ({exc}); quote it: \'{{"to": "a"}}\'') from None
    return [_prepared(payload, args.id, "the job")]


def _jobs_from_lines(lines: Iterable[bytes], id_key: str | None) -> list[NewJob]:
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
        jobs.append(_prepared(payload, job_id, f"line {number}"))
    return jobs


def _prepared(payload: Any, job_id: str | None, where: str) -> NewJob:
    try:
        return prepare(payload, job_id)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}; nothing was enqueued") from None


async def run_enqueue(args: argparse.Namespace) -> int:
    """Enqueue one job from the argument, or one per line of standard input."""
    if args.json is not None:
        if args.id_key is not None:
            raise UsageError("--id-key is for jobs read from standard input; use --id here")
        jobs = _jobs_from_argument(args)
    else:
        if args.id is not None:
            raise UsageError(
                "--id names one job: give its JSON as an argument, or use --id-key with lines"
            )
        jobs = _jobs_from_lines(sys.stdin.buffer, args.id_key)
    backend = redis_backend(args)
    accepted = deduplicated = conflicts = 0
    async with backend:
        try:
            for job in jobs:
                try:
                    receipt = await backend.add(job, AddMode.WAIT)
                except IdempotencyConflict as exc:
                    conflicts += 1
                    print(f"trioqueue: {printable(exc)}", file=sys.stderr)
                    continue
                deduplicated += receipt.deduplicated
                accepted += not receipt.deduplicated
                if args.json is not None:
                    state = "already there" if receipt.deduplicated else "enqueued"
                    print(f"{printable(receipt.id)} {state}")
        except BaseException:  # interrupted, or Redis went away: say how far it got
            done = accepted + deduplicated + conflicts
            if args.json is not None or not done:
                raise  # nothing sent yet, or one job: the error says it all
            print(
                f"stopped after {done} of {len(jobs)} jobs: accepted {accepted}, deduplicated "
                f"{deduplicated}, conflicts {conflicts}; jobs with ids can be sent again safely",
                file=sys.stderr,
            )
            raise
    if args.json is None:
        print(f"accepted {accepted}, deduplicated {deduplicated}, conflicts {conflicts}")
    return EXIT_CONFLICTS if conflicts else 0


# --- stats ----------------------------------------------------------------------------


async def run_stats(args: argparse.Namespace) -> int:
    """Print what the queue holds and how fast it moves; with --watch, until interrupted."""
    backend = redis_backend(args)
    async with backend:
        previous = await backend.stats()
        while True:
            await trio.sleep(args.interval)
            info, snap = await backend.inspect(), await backend.stats()
            rate = (snap.finished - previous.finished) / args.interval
            previous = snap
            print(_stats_text(args, info, snap, rate), flush=True)
            if not args.watch:
                return 0


def _stats_text(
    args: argparse.Namespace, info: QueueInfo, snap: MetricsSnapshot, rate: float
) -> str:
    if args.json:
        counters = {name: getattr(snap, name) for name in COUNTER_NAMES}
        return json.dumps(
            {"queue": args.queue, **attrs.asdict(info), "counters": counters, "per_second": rate}
        )
    oldest = "none" if info.oldest_claim_age is None else f"oldest {info.oldest_claim_age:.1f}s"
    return "\n".join(
        [
            f"queue {printable(args.queue)}: {info.ready} ready, {info.stored} stored for "
            f"lack of room, {info.processing} processing, {info.claims} claimed ({oldest}), "
            f"{info.dead} dead, {info.finished_kept} finished records kept",
            "counters: " + ", ".join(f"{name}={getattr(snap, name)}" for name in COUNTER_NAMES),
            f"throughput: {rate:.1f} jobs/s finished over the last {args.interval:g}s",
        ]
    )


# --- dead letters ---------------------------------------------------------------------


def _record_json(record: JobRecord) -> dict[str, Any]:
    r"""A record as JSON: times in ISO 8601 (UTC), and bytes that never decoded escaped.

    A record another client pushed that is not JSON has bytes for a payload: it
    shows as ``"payload": null`` with ``"payload_raw"``, the bytes as text with
    every byte that is not UTF-8 escaped (``\\xff``).
    """
    data = attrs.asdict(record)
    data["state"] = record.state.value
    for name in ("created_at", "updated_at"):
        data[name] = _iso(data[name])
    if isinstance(record.payload, bytes):
        data["payload"] = None
        data["payload_raw"] = record.payload.decode("utf-8", "backslashreplace")
    return data


def _iso(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, to the millisecond."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


async def _dead_action(args: argparse.Namespace, backend: RedisBackend) -> int:
    queue = Queue(backend)
    if args.action == "list":
        for record in await queue.dead_letters():
            if args.json:
                print(json.dumps(_record_json(record)))
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
        print(json.dumps(_record_json(found), indent=2))
        return 0
    if args.action == "requeue":
        ids = [r.id for r in await queue.dead_letters()] if args.all else [args.job_id]
        for job_id in ids:
            await queue.requeue_dead(job_id)
            print(f"{printable(job_id)} requeued")
        return 0
    purged = await queue.purge_dead(None if args.all else args.job_id)
    if not args.all and purged == 0:
        raise JobNotFound(args.job_id, "dead letters")
    print(f"purged {purged}")
    return 0
