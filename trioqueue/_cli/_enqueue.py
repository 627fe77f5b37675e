"""``trioqueue enqueue``: jobs from the arguments or standard input, sent and reported per job.

All of the input is checked before anything is sent, so bad input enqueues
nothing half-way.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from .._backend_values import AddMode
from .._exceptions import DependencyNotFound, IdempotencyConflict, QueueFull
from .._job_input import prepare
from .._record_json import iso_time
from .._records import JobState
from ._redis_args import redis_backend
from ._types import UsageError, printable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable

    from .._backend_values import NewJob, Receipt
    from .._backends.redis._backend import RedisBackend
    from .._backends.redis._sharded import ShardedBackend
    from .._records import JobRecord

__all__ = ["EXIT_CONFLICTS", "EXIT_REFUSED", "WAITING_REPORT_EVERY", "run_enqueue"]


EXIT_CONFLICTS: Final = 1
"""``enqueue``'s exit status when some jobs conflicted, were to run after unknown ones,
or became dead letters at once (a job they run after did not complete)."""


EXIT_REFUSED: Final = 1
"""``enqueue --no-wait``'s exit status when the queue was full."""


WAITING_REPORT_EVERY: Final = 3.0
"""Seconds between ``enqueue``'s lines while it waits for room in a full queue."""


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
            headers=None if args.headers is None else dict(args.headers),
            after=args.after,
            unique_key=args.unique_key,
            debounce=args.debounce,
            rate_key=args.rate_key,
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
    refused: int = 0  # a job named in --after is unknown
    deferred: int = 0
    dead: int = 0  # dead letters at once: a job they run after did not complete
    waiting_since: float | None = None  # when the add under way started

    @property
    def done(self) -> int:
        return self.accepted + self.deduplicated + self.conflicts + self.refused

    def summary(self, *, stopped: bool = False) -> str:
        text = (
            f"accepted {self.accepted}, deduplicated {self.deduplicated}, "
            f"conflicts {self.conflicts}"
        )
        if self.refused:
            text += f", refused {self.refused} (a job named in --after is unknown)"
        if stopped:
            text += f", not sent {self.total - self.done}"
        if self.stored:
            text += f" ({self.stored} of the accepted stored until the queue has room)"
        if self.scheduled:
            text += f" ({self.scheduled} of the accepted scheduled for later)"
        if self.deferred:
            text += f" ({self.deferred} of the accepted waiting for the jobs they run after)"
        if self.dead:
            text += (
                f" ({self.dead} of the accepted dead letters at once: a job they run after "
                "did not complete; trioqueue jobs dead lists them)"
            )
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
    return EXIT_CONFLICTS if tally.conflicts or tally.refused or tally.dead else 0


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
        except DependencyNotFound as exc:
            tally.refused += 1
            print(f"trioqueue enqueue: {printable(exc)}", file=sys.stderr)
            continue
        finally:
            tally.waiting_since = None
        tally.deduplicated += receipt.deduplicated
        tally.accepted += not receipt.deduplicated
        fresh = not receipt.deduplicated
        tally.scheduled += fresh and receipt.scheduled
        tally.deferred += fresh and receipt.deferred
        tally.dead += fresh and receipt.state is JobState.FAILED
        tally.stored += fresh and receipt.state is JobState.RECEIVED and not receipt.queued
        if args.json is not None:
            if receipt.id != job.id:  # another job holds the unique key
                print(f"{printable(job.id)} not added: job {printable(receipt.id)} holds its key")
            print(f"{printable(receipt.id)} {await _state_of(receipt, backend)}")
    return False


# how ``enqueue JSON`` names a job it found already there, in these states
_FOUND: Final = {
    JobState.PROCESSING: "running",
    JobState.COMPLETED: "completed",
    JobState.FAILED_RETRY: "waiting to retry",
    JobState.DROPPED: "dropped",
    JobState.CANCELLED: "cancelled",
}


async def _state_of(receipt: Receipt, backend: RedisBackend | ShardedBackend) -> str:
    """What became of one job, for ``enqueue JSON``'s line."""
    state, again = receipt.state, "already there, " if receipt.deduplicated else ""
    if state is JobState.SCHEDULED:
        record = await backend.status(receipt.id)
        due = record.due_at if record is not None else None
        when = "later" if due is None else iso_time(due)
        return f"{again}scheduled for {when}"
    if state is JobState.FAILED:
        record = await backend.status(receipt.id)
        why = _dead_because(record)
        return f"{again}a dead letter: {why}" if again else f"is a dead letter: {why}"
    if state in _FOUND:
        return again + _FOUND[state]
    if state is JobState.DEFERRED:
        return f"{again}waiting for the jobs it runs after"
    if receipt.deduplicated:
        return "already there"
    return "enqueued" if receipt.queued else "stored until the queue has room"


def _dead_because(record: JobRecord | None) -> str:
    """Why a dead letter is one, from its record (gone already: its retention ended it)."""
    if record is None:
        return "its record is gone already (the queue's retention)"
    why = record.reason or "its attempts are spent"
    if record.last_error is not None:
        why += f" ({record.last_error.type}: {record.last_error.message})"
    return printable(why)


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
