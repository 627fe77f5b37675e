"""The ``trioqueue`` command line (``python -m trioqueue`` is the same).

Each command is a coroutine taking the parsed arguments and returning the exit
status. Errors a user can meet are printed as one line that says what to fix:
exit status 2 for bad input or settings, 1 for an unreachable Redis, a queue or a job
that is not there, 130 when interrupted.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

import trio

from .._exceptions import BackendUnavailable, ConfigurationError, JobNotFound
from ._parser import build_parser
from ._redis_args import resolve_queue, resolve_redis_url
from ._types import NotThere, UsageError, printable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main"]


class _PrintableFormatter(logging.Formatter):
    """Log lines whose control characters (in a job id, an error message) are escaped.

    A traceback, appended after the line, keeps its own line breaks.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))


def _configure_logging(args: argparse.Namespace) -> None:
    args.verbose += args.verbose_after  # -v before the command or after it
    args.quiet += args.quiet_after
    level = args.log_level + 10 * (args.quiet - args.verbose)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PrintableFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=max(logging.DEBUG, min(level, logging.CRITICAL)), handlers=[handler])


def _check_memory_alone(args: argparse.Namespace) -> None:
    """``serve --memory`` names no Redis: refuse one given beside it."""
    given = [
        option
        for option, value in (("--redis", args.redis), ("--redis-url-file", args.redis_url_file))
        if value is not None
    ]
    if given:
        raise UsageError(
            f"--memory keeps the jobs in this process, and {' and '.join(given)} names a "
            "Redis to keep them in: give one or the other"
        )


def _leaf(error: BaseException) -> BaseException:
    """The one error inside nested single-error groups (a nursery wraps what it raises)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser, commands = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command, as its other errors are
        hint = ""
        if args.command == "worker" and "--handler" in extra:  # serve's way, not worker's
            hint = " (worker takes its handler first, without --handler: MODULE:HANDLER)"
        commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    _configure_logging(args)
    try:
        try:
            optional_redis = args.command in ("demo", "serve")  # in memory without it
            if not optional_redis:
                resolve_queue(args)
            if getattr(args, "memory", False):
                _check_memory_alone(args)
            elif hasattr(args, "redis"):
                resolve_redis_url(args, required=not optional_redis)
            if args.command == "serve" and args.redis is not None:
                resolve_queue(args)
            return int(trio.run(args.run, args, restrict_keyboard_interrupt_to_checkpoints=True))
        except BaseExceptionGroup as group:
            raise _leaf(group) from None
    except (UsageError, ConfigurationError) as exc:
        print(f"trioqueue {args.command}: {printable(exc)}", file=sys.stderr)
        return 2
    except JobNotFound as exc:  # in the command line's words, not the library's
        lists = "trioqueue dead list" if exc.where == "dead letters" else "trioqueue jobs"
        print(
            f"trioqueue {args.command}: no job {printable(exc.job_id)!r} among the "
            f"{exc.where}; `{lists}` shows them (a finished job is forgotten once the "
            "queue's retention has passed)",
            file=sys.stderr,
        )
        return 1
    except (BackendUnavailable, NotThere) as exc:
        print(f"trioqueue {args.command}: {printable(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if args.command == "stats" and args.watch:
            return 0  # the way to stop --watch
        print(f"trioqueue {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
        # point stdout at devnull so the flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if args.verbose:
            raise
        print(
            f"trioqueue {args.command}: {type(exc).__name__}: {printable(exc)} "
            "(run with -v for the traceback)",
            file=sys.stderr,
        )
        return 1
