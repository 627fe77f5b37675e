"""``trioqueue result``: one job's result, waited for, from the command line."""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Final

import trio

from ._cli_args import printable, redis_backend
from ._queue import Queue
from ._result_errors import NoResult

if TYPE_CHECKING:
    import argparse

__all__ = ["NOT_YET", "run_result"]

NOT_YET: Final = 3
"""The exit status of ``trioqueue result --timeout`` when the job has not finished."""


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
