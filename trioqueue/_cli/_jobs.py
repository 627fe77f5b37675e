"""``trioqueue jobs``, ``result``, ``cancel`` and ``run-now``: jobs from the command line."""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Final

import trio

from .._backend_values import PLACES, CancelResult
from .._exceptions import JobNotFound
from .._queue import Queue
from .._result_errors import JobCancelled, NoResult
from ._redis_args import redis_backend
from ._table import print_table
from ._types import printable

if TYPE_CHECKING:
    import argparse

__all__ = ["NOT_YET", "run_cancel", "run_jobs", "run_result", "run_run_now"]

NOT_YET: Final = 3
"""The exit status of ``trioqueue result --timeout`` when the job has not finished."""


async def run_jobs(args: argparse.Namespace) -> int:
    """List the jobs of each place asked for (every place by default), next in turn first."""
    async with redis_backend(args) as backend:
        queue = Queue(backend)
        rows = []
        for place in args.places or PLACES:
            for job_id in await queue.job_ids(place, limit=args.limit):
                record = await queue.status(job_id)  # None: it finished meanwhile, forgotten
                row = {
                    "place": place,
                    "id": job_id,
                    "state": "gone" if record is None else record.state.value,
                    "attempts": None if record is None else record.attempts,
                }
                if record is not None and record.progress is not None:
                    row["progress"] = record.progress  # what its handler last reported
                rows.append(row)
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    if not rows:
        places = ", ".join(args.places or PLACES)
        print(f"trioqueue jobs: no jobs in {places}", file=sys.stderr)
        return 0
    header = ["place", "id", "state", "attempts"]
    progress = any("progress" in row for row in rows)
    if progress:
        header.append("progress")
    table = []
    for row in rows:
        attempts = "-" if row["attempts"] is None else row["attempts"]
        cells = [row["place"], row["id"], row["state"], attempts]
        if progress:
            cells.append(
                json.dumps(row["progress"], ensure_ascii=False) if "progress" in row else ""
            )
        table.append(cells)
    print_table(header, table, headed=not args.no_header)
    return 0


async def run_result(args: argparse.Namespace) -> int:
    """Wait for the job to finish; print its result as JSON, or say why it has none."""
    async with redis_backend(args) as backend:
        queue = Queue(backend)
        timeout = math.inf if args.timeout is None else args.timeout
        with trio.move_on_after(timeout):
            try:
                value = await queue.result(args.job_id)
            except NoResult as exc:
                print(f"trioqueue result: {printable(exc)}", file=sys.stderr)
                return 1
            print(json.dumps(value, ensure_ascii=False))
            return 0
        record = await queue.status(args.job_id)
        state = "gone" if record is None else record.state.value
        print(
            f"trioqueue result: job {printable(args.job_id)} has not finished within "
            f"{args.timeout:g} s (it is {state}); wait longer, or without --timeout",
            file=sys.stderr,
        )
        return NOT_YET


async def run_cancel(args: argparse.Namespace) -> int:
    """Cancel the job; with --wait, until its worker has stopped it."""
    async with redis_backend(args) as backend:
        queue = Queue(backend)
        job = printable(args.job_id)
        done = await queue.cancel(args.job_id)
        if done is CancelResult.FINISHED:
            record = await queue.status(args.job_id)
            state = "gone" if record is None else record.state.value
            print(
                f"trioqueue cancel: job {job} has finished already ({state}); nothing was "
                "cancelled",
                file=sys.stderr,
            )
            return 1
        if done is CancelResult.CANCELLED:
            print(f"{job} cancelled")
            return 0
        if not args.wait:
            print(
                f"{job}: a worker holds it; it stops the job at its next lease renewal "
                "(within its sweep interval, 1 s by default): see `trioqueue result`"
            )
            return 0
        try:
            await queue.result(args.job_id)
        except JobCancelled:
            print(f"{job} cancelled: its worker stopped it")
            return 0
        except NoResult as exc:
            print(f"trioqueue cancel: {printable(exc)}, before its worker heard", file=sys.stderr)
            return 1
        print(
            f"trioqueue cancel: job {job} completed before its worker heard of the cancel",
            file=sys.stderr,
        )
        return 1


async def run_run_now(args: argparse.Namespace) -> int:
    """Put the job that waits for its due time on the ready queue now."""
    async with redis_backend(args) as backend:
        job = printable(args.job_id)
        try:
            record = await Queue(backend).run_now(args.job_id)
        except JobNotFound:
            print(
                f"trioqueue run-now: job {job} is not waiting for a due time: `trioqueue jobs "
                "scheduled` lists those that are",
                file=sys.stderr,
            )
            return 1
    where = "on the ready queue" if record.queued else "first in line as room frees"
    print(f"{job} runs now: {where}")
    return 0
