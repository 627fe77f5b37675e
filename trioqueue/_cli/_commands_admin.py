"""The arguments of the commands that look at and change a queue: enqueue, jobs, stats, dead, ..."""

from __future__ import annotations

import argparse
import datetime
import logging
from typing import TYPE_CHECKING

from .._backend_values import PLACES, AddMode
from .._payload import PRIORITIES
from ._redis_args import (
    add_queue_option,
    add_redis_options,
    add_redis_url_options,
    add_shards_option,
)
from ._types import header, non_negative_int, positive_int, rate_limit, seconds

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._parser import Parser

__all__ = [
    "add_cancel",
    "add_dead",
    "add_enqueue",
    "add_jobs",
    "add_queue",
    "add_result",
    "add_run_now",
    "add_stats",
]


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


def add_enqueue(commands: argparse._SubParsersAction[Parser]) -> None:
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
    enqueue.add_argument(
        "--header",
        metavar="NAME=VALUE",
        type=header,
        action="append",
        dest="headers",
        help="metadata every job carries to its handler (job.headers); repeat for more",
    )
    enqueue.add_argument(
        "--after",
        metavar="ID",
        action="append",
        help="run the jobs once job ID has completed (they wait, deferred, until then; if it "
        "fails they become dead letters); repeat for more",
    )
    enqueue.add_argument(
        "--unique-key",
        metavar="KEY",
        help="add no job while one with KEY waits or runs (that job is reported instead)",
    )
    enqueue.add_argument(
        "--debounce",
        metavar="SECONDS",
        type=float,
        help="with --unique-key: the job is due SECONDS from now, and a newer one with the "
        "key replaces it until then",
    )
    enqueue.add_argument(
        "--rate-key",
        metavar="KEY",
        help="whom the jobs' starts count against under the queue's per-key rate limit "
        "(`trioqueue queue rate-limit --per-key`), e.g. a customer's id",
    )
    add_redis_options(enqueue)
    enqueue.set_defaults(run=_enqueue, log_level=logging.WARNING)


def _place(text: str) -> str:
    if text not in PLACES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a place: name {', '.join(PLACES)}")
    return text


def add_jobs(commands: argparse._SubParsersAction[Parser]) -> None:
    jobs = commands.add_parser(
        "jobs",
        help="list the jobs of a queue by place: ready, stored, scheduled, deferred, claimed, "
        "dead, finished",
        description="List the ids of the jobs in each PLACE (every place if none is named), "
        "next in turn first, with each job's state and attempts: a line each under a header "
        "(place, id, state, attempts, and progress when a job reported some). ready: on the "
        "ready lists, in the order workers take them; stored: "
        "accepted while the queue was full; scheduled: waiting for their due time; "
        "deferred: waiting for the jobs they run after; claimed: held by a worker; dead: "
        "dead letters; finished: the records the "
        "retention keeps. Elements another program pushed have no id until claimed.",
    )
    jobs.add_argument("places", metavar="PLACE", nargs="*", type=_place, help="where")
    jobs.add_argument(
        "--limit", type=non_negative_int, default=20, help="most jobs per place (default 20)"
    )
    jobs.add_argument("--json", action="store_true", help="list as JSON, one object a line")
    jobs.add_argument("--no-header", action="store_true", help="leave out the header line")
    add_redis_options(jobs)
    jobs.set_defaults(run=_jobs, log_level=logging.WARNING)


def _one_job(
    commands: argparse._SubParsersAction[Parser],
    name: str,
    run: Callable[[argparse.Namespace], Awaitable[int]],
    summary: str,
    description: str,
) -> Parser:
    """Command *name*, about the job its ID names, on a Redis queue; add its own options."""
    command = commands.add_parser(name, help=summary, description=description)
    command.add_argument("job_id", metavar="ID", help="the job's id")
    add_redis_options(command)
    command.set_defaults(run=run, log_level=logging.WARNING)
    return command


def add_result(commands: argparse._SubParsersAction[Parser]) -> None:
    result = _one_job(
        commands,
        "result",
        _result,
        "wait for a job to finish and print what its handler returned",
        "Wait until job ID finishes, then print its handler's return value as JSON (exit "
        "status 0). A job that failed, was dropped, or whose value was not stored is said on "
        "stderr (exit status 1), as is an unknown id; one that has not finished within "
        "--timeout, too (exit status 3).",
    )
    result.add_argument(
        "--timeout", type=seconds, default=None, help="seconds to wait at most (default: no limit)"
    )


def add_cancel(commands: argparse._SubParsersAction[Parser]) -> None:
    cancel = _one_job(
        commands,
        "cancel",
        _cancel,
        "cancel a job: it will not run (again)",
        "Cancel job ID. One waiting for a worker is removed at once; one a worker holds is "
        "stopped by that worker at its next lease renewal (its handler sees trio.Cancelled), "
        "and recorded cancelled, not failed. A finished job is left alone (exit status 1).",
    )
    cancel.add_argument(
        "--wait", action="store_true", help="wait until a worker holding the job has stopped it"
    )


def add_run_now(commands: argparse._SubParsersAction[Parser]) -> None:
    _one_job(
        commands,
        "run-now",
        _run_now,
        "run a job that waits for its due time now",
        "Put job ID, which waits for its due time (delayed, a retry given back mid-backoff, "
        "or over its rate key's limit), on the ready queue at once; on a full queue it goes "
        "first as room frees. A job over its rate key's limit still starts only when its key "
        "allows. Exit status 1 if the job is not waiting for a due time.",
    )


def add_stats(commands: argparse._SubParsersAction[Parser]) -> None:
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


def add_dead(commands: argparse._SubParsersAction[Parser]) -> None:
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
    dead.add_argument("--no-header", action="store_true", help="list without the header line")
    add_redis_options(dead)
    dead.set_defaults(run=_dead, log_level=logging.WARNING)


def add_queue(commands: argparse._SubParsersAction[Parser]) -> None:
    queue = commands.add_parser(
        "queue",
        help="show or change a Redis queue's settings (capacity, mode, key TTL), pause it, "
        "limit its rate",
        description="show: the settings stored with the queue, which every command and "
        "worker on it follows, whether it is paused, and its rate limits. configure: change "
        "them in place; running workers and producers follow at once. The capacity may "
        "change at any time; the mode and the key TTL only while the queue holds no waiting "
        "or claimed job. pause: workers finish the jobs they hold and claim none until "
        "resume; producers go on enqueueing, and nothing is lost. rate-limit: at most so "
        "many job starts per window for the whole queue (--rate) and for the jobs of each "
        "rate key (--per-key); every worker on the queue follows at once.",
    )
    queue.add_argument("action", choices=["show", "configure", "pause", "resume", "rate-limit"])
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
    for option, dest, whose in (
        ("--rate", "new_rate", "every start from the queue"),
        ("--per-key", "new_per_key", "the starts of each rate key's jobs"),
    ):
        queue.add_argument(
            option,
            dest=dest,
            metavar="LIMIT",
            type=rate_limit,
            help=f"with rate-limit: the limit on {whose}, as STARTS/PER ('10/s', '100/1m', "
            "'10/s burst 5'), or 'none' to remove it; left out, it stays",
        )
    queue.add_argument("--json", action="store_true", help="print the settings as JSON")
    # what the backend is built with: nothing of its own, so it changes nothing by itself
    queue.set_defaults(
        run=_queue, log_level=logging.WARNING, capacity=None, simple=None, key_ttl=None,
        min_idle=30.0,
    )  # fmt: skip


async def _enqueue(args: argparse.Namespace) -> int:
    from ._enqueue import run_enqueue

    return await run_enqueue(args)


async def _jobs(args: argparse.Namespace) -> int:
    from ._jobs import run_jobs

    return await run_jobs(args)


async def _result(args: argparse.Namespace) -> int:
    from ._jobs import run_result

    return await run_result(args)


async def _cancel(args: argparse.Namespace) -> int:
    from ._jobs import run_cancel

    return await run_cancel(args)


async def _run_now(args: argparse.Namespace) -> int:
    from ._jobs import run_run_now

    return await run_run_now(args)


async def _stats(args: argparse.Namespace) -> int:
    from ._admin import run_stats

    return await run_stats(args)


async def _queue(args: argparse.Namespace) -> int:
    from ._queue import run_queue

    return await run_queue(args)


async def _dead(args: argparse.Namespace) -> int:
    from ._admin import run_dead

    return await run_dead(args)
