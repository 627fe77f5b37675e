"""The ``trioqueue`` command line (``python -m trioqueue`` is the same).

Each command is a coroutine taking the parsed arguments and returning the exit
status. Errors a user can meet are printed as one line that says what to fix:
exit status 2 for bad input or settings, 1 for an unreachable Redis, a queue or a job
that is not there, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import trio

from ._backend import PLACES, AddMode
from ._cli_args import (
    SERVE_MAX_MEMORY_MIB,
    NotThere,
    UsageError,
    add_queue_option,
    add_redis_options,
    add_redis_url_options,
    add_shards_option,
    bind_address,
    non_negative,
    non_negative_int,
    port,
    positive_int,
    printable,
    rate,
    resolve_queue,
    resolve_redis_url,
    seconds,
)
from ._exceptions import BackendUnavailable, ConfigurationError, JobNotFound
from ._payload import PRIORITIES
from ._retry import RetryPolicy

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless it has none or its help says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.nargs == 0  # a flag: --json, -v
            or action.default is None
            or action.default is argparse.SUPPRESS
            or "default" in text
        ):
            return text
        return text + " (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line: ``trioqueue COMMAND: error: ...``, exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        # --handler is not short for --handler-timeout: an option is given whole
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message)}; see `{self.prog} --help`\n")


def _add_verbosity(parser: argparse.ArgumentParser, suffix: str = "") -> None:
    """``-v`` and ``-q``; *suffix* keeps the command's own apart from those before it."""
    parser.add_argument(
        "-v", "--verbose", dest="verbose" + suffix, action="count", default=0, help="log more"
    )
    parser.add_argument(
        "-q", "--quiet", dest="quiet" + suffix, action="count", default=0, help="log less"
    )


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser, and each command's own (for errors about the command's arguments)."""
    parser = _Parser(prog="trioqueue", description="A job queue for Trio.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"trioqueue {importlib.metadata.version('trioqueue')}",
    )
    _add_verbosity(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_demo, _add_worker, _add_enqueue, _add_jobs, _add_result, _add_cancel, _add_stats,
        _add_dead, _add_queue, _add_serve,
    ):  # fmt: skip
        add(commands)
    for command in commands.choices.values():
        _add_verbosity(command, "_after")
    return parser, dict(commands.choices)


def _add_demo(commands: argparse._SubParsersAction[_Parser]) -> None:
    demo = commands.add_parser(
        "demo",
        help="run jobs with simulated failures through a pool and print the metrics",
        description="Enqueue --jobs jobs into a queue of --capacity (in memory, or on Redis "
        "with --redis or --redis-url-file), run them on --workers workers that fail at "
        "--fail-rate, retry with backoff, and print the report.",
    )
    demo.add_argument("--jobs", type=positive_int, default=1000, help="jobs to enqueue")
    demo.add_argument("--workers", type=positive_int, default=4, help="concurrent handlers")
    demo.add_argument("--capacity", type=positive_int, default=64, help="ready-queue capacity")
    demo.add_argument("--fail-rate", type=rate, default=0.2, help="chance an attempt fails")
    demo.add_argument("--max-attempts", type=positive_int, default=4, help="attempts per job")
    demo.add_argument("--handler-ms", type=non_negative, default=1.0, help="simulated work")
    demo.add_argument(
        "--seed", type=int, help="seed for failures and jitter (default: a random one)"
    )
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    # not from the environment: a variable exported for the other commands must not
    # turn the in-memory demo into one that writes to that Redis
    add_redis_url_options(demo, environment=False)
    demo.add_argument("--queue", metavar="NAME", help="the Redis queue (default: a fresh one)")
    demo.set_defaults(run=_demo, log_level=logging.WARNING)


def _add_worker(commands: argparse._SubParsersAction[_Parser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a handler on the jobs of a Redis queue until SIGTERM or SIGINT",
        description="Run MODULE:HANDLER (an async function taking a trioqueue.Job) on the "
        "queue's jobs. SIGTERM or SIGINT stops claiming, lets running handlers finish within "
        "--grace, cancels the rest and puts every unfinished job back; a second signal stops "
        "at once. Exit status 0: clean; 3: handlers were cancelled (their jobs went back).",
    )
    worker.add_argument(
        "handler",
        metavar="MODULE:HANDLER",
        help="e.g. myapp.jobs:send_email; or a dict of task names to handlers, each job run "
        "by the one its task names (enqueue --task)",
    )
    worker.add_argument(
        "--lifespan",
        action="store_true",
        help="MODULE:HANDLER names a lifespan instead: a function returning an async context "
        "manager that opens what handlers share (an HTTP client, a database pool) and yields "
        "the handler; entered before the first job, left after the last",
    )
    add_redis_options(worker)
    worker.add_argument("--workers", type=positive_int, default=4, help="concurrent handlers")
    worker.add_argument("--prefetch", type=non_negative_int, default=0, help="jobs claimed ahead")
    default_retry = RetryPolicy()
    worker.add_argument(
        "--max-attempts",
        type=positive_int,
        default=default_retry.max_attempts,
        help="attempts per job, the first included",
    )
    worker.add_argument(
        "--base-delay",
        type=non_negative,
        default=default_retry.base_delay,
        help="seconds: the upper bound of the first retry's delay, doubling per failure",
    )
    worker.add_argument(
        "--max-delay",
        type=non_negative,
        default=default_retry.max_delay,
        help="seconds: the cap on any retry's delay",
    )
    worker.add_argument(
        "--handler-timeout",
        type=seconds,
        default=None,
        help="seconds one attempt may run before it is cancelled and counted as a failure",
    )
    worker.add_argument(
        "--max-deliveries",
        type=positive_int,
        default=20,
        help="claims of one job before it is dead-lettered as poison (above --max-attempts)",
    )
    worker.add_argument(
        "--grace", type=non_negative, default=30.0, help="seconds running jobs get to finish"
    )
    worker.add_argument(
        "--sweep-interval",
        type=seconds,
        default=1.0,
        help="seconds between sweeps (recovering the claims of dead workers)",
    )
    worker.add_argument(
        "--give-up-after",
        metavar="SECONDS",
        type=seconds,
        default=None,
        help="exit with status 1 once Redis has been unreachable this long without one call "
        "succeeding, for a supervisor to restart the worker; until then it retries, backing "
        "off up to 15 s between tries (default: never)",
    )
    worker.add_argument(
        "--cron",
        metavar="FILE",
        default=None,
        help="also run the schedules of this TOML file ([[schedule]] tables: name, and cron = "
        "'0 3 * * *' or every = SECONDS; timezone, payload, missed = skip|latest|all): "
        "each tick becomes one job on the queue, however many workers run the same file",
    )
    worker.add_argument(
        "--metrics-port", type=port, default=None, help="serve Prometheus /metrics on this port"
    )
    worker.add_argument(
        "--metrics-addr",
        metavar="ADDRESS",
        default="127.0.0.1",
        help="the address --metrics-port listens on (default: 127.0.0.1, this host only; "
        "0.0.0.0 for every IPv4 interface, :: for every IPv6 one)",
    )
    worker.set_defaults(run=_worker, log_level=logging.INFO)


def _aware_time(text: str) -> datetime.datetime:
    """``--at``'s value: an ISO 8601 time that names its zone."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time; e.g. 2026-12-24T18:00:00+01:00"
        ) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no time zone, so the moment it names is unknown; add one, e.g. "
            f"{text}+00:00 or {text}Z"
        )
    return when


def _add_enqueue(commands: argparse._SubParsersAction[_Parser]) -> None:
    enqueue = commands.add_parser(
        "enqueue",
        help="enqueue a job, or one job per line of standard input",
        description="Enqueue the JSON argument as one job, or, without it, every line of "
        "standard input as a job. Every line is checked before any is enqueued.",
    )
    enqueue.add_argument("json", metavar="JSON", nargs="?", help="the payload, e.g. '{\"n\": 1}'")
    enqueue.add_argument("--id", help="the job id (idempotent: the same id is enqueued once)")
    enqueue.add_argument("--id-key", metavar="KEY", help="take each line's id from this key")
    full = enqueue.add_mutually_exclusive_group()
    full.add_argument(
        "--no-wait",
        dest="mode",
        action="store_const",
        const=AddMode.NOWAIT,
        help="when the queue is full, stop and report the jobs not accepted (exit status 1) "
        "instead of waiting for room",
    )
    full.add_argument(
        "--submit",
        dest="mode",
        action="store_const",
        const=AddMode.SUBMIT,
        help="when the queue is full, store the jobs and schedule them as room frees, "
        "instead of waiting for room",
    )
    enqueue.set_defaults(mode=AddMode.WAIT)
    later = enqueue.add_mutually_exclusive_group()
    later.add_argument(
        "--delay",
        metavar="SECONDS",
        type=float,
        help="store the jobs until SECONDS from now (the Redis server's clock); they take "
        "no room on the ready queue until then",
    )
    later.add_argument(
        "--at",
        metavar="WHEN",
        type=_aware_time,
        help="store the jobs until WHEN, an ISO 8601 time with its zone, e.g. "
        "2026-12-24T18:00:00+01:00 or 2026-12-24T17:00Z",
    )
    enqueue.add_argument(
        "--task",
        metavar="NAME",
        default=None,
        help="the task name of the jobs: which handler runs them in a worker given a table "
        "of handlers",
    )
    enqueue.add_argument(
        "--max-attempts",
        type=positive_int,
        default=None,
        help="the attempts each job gets, over the workers' own --max-attempts",
    )
    enqueue.add_argument(
        "--handler-timeout",
        metavar="SECONDS",
        type=seconds,
        default=None,
        help="seconds one attempt of each job may run, over the workers' own",
    )
    enqueue.add_argument(
        "--priority",
        type=int,
        choices=PRIORITIES,
        default=0,
        help="the jobs' level, from 2 to -2: a worker takes the highest level first",
    )
    add_redis_options(enqueue)
    enqueue.set_defaults(run=_enqueue, log_level=logging.WARNING)


def _place(text: str) -> str:
    if text not in PLACES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a place: name {', '.join(PLACES)}")
    return text


def _add_jobs(commands: argparse._SubParsersAction[_Parser]) -> None:
    jobs = commands.add_parser(
        "jobs",
        help="list the jobs of a queue by place: ready, stored, scheduled, claimed, dead, finished",
        description="List the ids of the jobs in each PLACE (every place if none is named), "
        "next in turn first, with each job's state and attempts: a line each, PLACE ID STATE "
        "ATTEMPTS. ready: on the ready lists, in the order workers take them; stored: "
        "accepted while the queue was full; scheduled: waiting for their due time; "
        "claimed: held by a worker; dead: dead letters; finished: the records the "
        "retention keeps. Elements another program pushed have no id until claimed.",
    )
    jobs.add_argument("places", metavar="PLACE", nargs="*", type=_place, help="where")
    jobs.add_argument(
        "--limit", type=non_negative_int, default=20, help="most jobs per place (default 20)"
    )
    jobs.add_argument("--json", action="store_true", help="list as JSON, one object a line")
    add_redis_options(jobs)
    jobs.set_defaults(run=_jobs, log_level=logging.WARNING)


def _add_result(commands: argparse._SubParsersAction[_Parser]) -> None:
    result = commands.add_parser(
        "result",
        help="wait for a job to finish and print what its handler returned",
        description="Wait until job ID finishes, then print its handler's return value as "
        "JSON (exit status 0). A job that failed, was dropped, or whose value was not stored "
        "is said on stderr (exit status 1), as is an unknown id; one that has not finished "
        "within --timeout, too (exit status 3).",
    )
    result.add_argument("job_id", metavar="ID", help="the job's id")
    result.add_argument(
        "--timeout", type=seconds, default=None, help="seconds to wait at most (default: no limit)"
    )
    add_redis_options(result)
    result.set_defaults(run=_result, log_level=logging.WARNING)


def _add_cancel(commands: argparse._SubParsersAction[_Parser]) -> None:
    cancel = commands.add_parser(
        "cancel",
        help="cancel a job: it will not run (again)",
        description="Cancel job ID. One waiting for a worker is removed at once; one a worker "
        "holds is stopped by that worker at its next lease renewal (its handler sees "
        "trio.Cancelled), and recorded cancelled, not failed. A finished job is left alone "
        "(exit status 1).",
    )
    cancel.add_argument("job_id", metavar="ID", help="the job's id")
    cancel.add_argument(
        "--wait", action="store_true", help="wait until a worker holding the job has stopped it"
    )
    add_redis_options(cancel)
    cancel.set_defaults(run=_cancel, log_level=logging.WARNING)


def _add_stats(commands: argparse._SubParsersAction[_Parser]) -> None:
    stats = commands.add_parser(
        "stats",
        help="what a Redis queue holds and how fast it moves",
        description="Print the queue's lists, claims (and the oldest claim's age), dead "
        "letters, finished records kept, every counter and the throughput over --interval.",
    )
    add_redis_options(stats)
    stats.add_argument("--watch", action="store_true", help="print again every --interval")
    stats.add_argument(
        "--interval", type=seconds, default=1.0, help="seconds the throughput is measured over"
    )
    stats.add_argument("--json", action="store_true", help="print JSON, one object a line")
    stats.set_defaults(run=_stats, log_level=logging.WARNING)


def _add_dead(commands: argparse._SubParsersAction[_Parser]) -> None:
    dead = commands.add_parser(
        "dead",
        help="list, show, requeue or purge dead letters",
        description="list: every dead letter; show ID: one record; requeue ID|--all: back on "
        "the queue with fresh attempts (atomic per job); purge ID|--all: forget them.",
    )
    dead.add_argument("action", choices=["list", "show", "requeue", "purge"])
    dead.add_argument("job_id", metavar="ID", nargs="?", help="the dead letter's job id")
    dead.add_argument("--all", action="store_true", help="requeue or purge every dead letter")
    dead.add_argument("--json", action="store_true", help="list as JSON, one object a line")
    add_redis_options(dead)
    dead.set_defaults(run=_dead, log_level=logging.WARNING)


def _add_queue(commands: argparse._SubParsersAction[_Parser]) -> None:
    queue = commands.add_parser(
        "queue",
        help="show or change a Redis queue's settings (capacity, mode, key TTL)",
        description="show: the settings stored with the queue, which every command and "
        "worker on it follows. configure: change them in place; running workers and "
        "producers follow at once. The capacity may change at any time; the mode and the "
        "key TTL only while the queue holds no waiting or claimed job.",
    )
    queue.add_argument("action", choices=["show", "configure"])
    add_redis_url_options(queue)
    add_queue_option(queue)
    add_shards_option(queue)
    queue.add_argument(
        "--capacity", dest="new_capacity", type=positive_int, help="the new capacity"
    )
    queue.add_argument(
        "--mode", dest="new_mode", choices=["reliable", "simple"], help="the new mode"
    )
    ttl = queue.add_mutually_exclusive_group()
    ttl.add_argument("--key-ttl", dest="new_key_ttl", type=seconds, help="the new key TTL")
    ttl.add_argument("--no-key-ttl", action="store_true", help="remove the key TTL")
    queue.add_argument("--json", action="store_true", help="print the settings as JSON")
    # what the backend is built with: nothing of its own, so it changes nothing by itself
    queue.set_defaults(
        run=_queue, log_level=logging.WARNING, capacity=None, simple=None, key_ttl=None,
        min_idle=30.0,
    )  # fmt: skip


def _add_serve(commands: argparse._SubParsersAction[_Parser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the HTTP ingest service (POST /jobs), with --handler its workers too",
        description="Serve the HTTP API (POST /jobs, GET /jobs/ID, /stats, /healthz, /readyz, "
        "/openapi.json) and a live dashboard at / (the gauges, throughput, latency, the dead "
        "letters with requeue and purge, a job lookup) on a queue in memory, or on Redis "
        "with --redis and --queue. With "
        "--handler, a worker pool runs the jobs in the same process (in memory it is "
        "needed: nothing else runs them). SIGTERM or SIGINT stops accepting, finishes "
        "requests in flight, then stops the pool; exit status 3: jobs were cut short "
        "or, in memory, lost.",
    )
    serve.add_argument(
        "--bind",
        type=bind_address,
        default="127.0.0.1:8000",
        help="HOST:PORT to listen on ([IPv6]:PORT for IPv6; default 127.0.0.1:8000)",
    )
    serve.add_argument(
        "--handler", metavar="MODULE:HANDLER", help="also run a worker pool on this handler"
    )
    serve.add_argument("--workers", type=positive_int, default=4, help="concurrent handlers")
    serve.add_argument(
        "--max-attempts",
        type=positive_int,
        default=RetryPolicy().max_attempts,
        help="attempts per job before it becomes a dead letter (the RetryPolicy's)",
    )
    serve.add_argument(
        "--grace", type=non_negative, default=30.0, help="seconds running jobs get to finish"
    )
    serve.add_argument(
        "--max-body", type=positive_int, default=1024 * 1024 + 4096, help="largest body, bytes"
    )
    serve.add_argument(
        "--concurrency", type=positive_int, default=64, help="requests served at once"
    )
    serve.add_argument(
        "--request-timeout", type=seconds, default=10.0, help="seconds one request may take"
    )
    serve.add_argument(
        "--admin-token",
        metavar="TOKEN",
        help="the bearer token that reading jobs and dead letters needs, and requeueing, "
        "purging and cancelling (default: $TRIOQUEUE_ADMIN_TOKEN, which `ps` does not show; "
        "without either, reads are open, changes are off and only a loopback --bind is taken)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="bind to an address other hosts reach without a token (when a proxy in front "
        "guards the service): anyone who reaches it reads every job's payload and result",
    )
    serve.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        help="a name clients reach the service by (its Host header); others are refused, "
        "which stops DNS rebinding. IP addresses, localhost and this machine's names always "
        "pass. Repeat for more",
    )
    serve.add_argument(
        "--tracebacks",
        action="store_true",
        help="show the last error's traceback in records over HTTP (by default its type and "
        "message only)",
    )
    # not from the environment: as for demo, a variable exported for the other commands
    # must not turn a service in memory into one on that Redis
    add_redis_url_options(serve, environment=False)
    add_queue_option(serve)
    add_shards_option(serve)
    serve.add_argument(
        "--capacity", type=positive_int, help="ready-queue capacity (memory default: 1000)"
    )
    serve.add_argument(
        "--max-memory",
        type=positive_int,
        metavar="MIB",
        help=f"in memory, the most MiB the jobs and kept records may hold; beyond it POST "
        f"/jobs answers 503 until workers free room (default {SERVE_MAX_MEMORY_MIB}; on "
        "Redis, its own maxmemory bounds it)",
    )
    serve.set_defaults(run=_serve, log_level=logging.INFO, min_idle=30.0, simple=None, key_ttl=None)


async def _demo(args: argparse.Namespace) -> int:
    from ._cli_demo import run_demo  # lazily: imports tqdm

    if args.queue is not None and args.redis is None:
        raise UsageError(
            "--queue names a Redis queue: give --redis URL (or --redis-url-file PATH) too"
        )
    snap = await run_demo(args)
    if args.json:
        data = attrs.asdict(snap)
        data["conserved"] = snap.conserved
        print(json.dumps(data, indent=2), flush=True)
    else:
        print(snap.report(), flush=True)
    return 0 if snap.conserved else 1


async def _serve(args: argparse.Namespace) -> int:
    from ._cli_serve import run_serve

    return await run_serve(args)


async def _worker(args: argparse.Namespace) -> int:
    from ._cli_worker import run_worker

    return await run_worker(args)


async def _enqueue(args: argparse.Namespace) -> int:
    from ._cli_admin import run_enqueue

    return await run_enqueue(args)


async def _jobs(args: argparse.Namespace) -> int:
    from ._cli_jobs import run_jobs

    return await run_jobs(args)


async def _result(args: argparse.Namespace) -> int:
    from ._cli_jobs import run_result

    return await run_result(args)


async def _cancel(args: argparse.Namespace) -> int:
    from ._cli_jobs import run_cancel

    return await run_cancel(args)


async def _stats(args: argparse.Namespace) -> int:
    from ._cli_admin import run_stats

    return await run_stats(args)


async def _queue(args: argparse.Namespace) -> int:
    from ._cli_queue import run_queue

    return await run_queue(args)


async def _dead(args: argparse.Namespace) -> int:
    from ._cli_admin import run_dead

    return await run_dead(args)


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
    # the client's own notes (a script reloaded after a restart) only with -vv
    logging.getLogger("coredis").setLevel(logging.DEBUG if args.verbose >= 2 else logging.WARNING)


def _leaf(error: BaseException) -> BaseException:
    """The one error inside nested single-error groups (a nursery wraps what it raises)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser, commands = _parser()
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
            if hasattr(args, "redis"):
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
