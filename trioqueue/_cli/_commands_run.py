"""The arguments of the commands that run jobs (demo, worker, serve), each run lazily."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import attrs

from .._retry import RetryPolicy
from ._redis_args import (
    add_queue_option,
    add_redis_options,
    add_redis_url_options,
    add_shards_option,
)
from ._types import (
    SERVE_MAX_MEMORY_MIB,
    UsageError,
    bind_address,
    non_negative,
    non_negative_int,
    port,
    positive_int,
    rate,
    seconds,
)

if TYPE_CHECKING:
    import argparse

    from ._parser import Parser

__all__ = ["add_demo", "add_serve", "add_worker"]


def add_demo(commands: argparse._SubParsersAction[Parser]) -> None:
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


def add_worker(commands: argparse._SubParsersAction[Parser]) -> None:
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


def add_serve(commands: argparse._SubParsersAction[Parser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the HTTP ingest service (POST /jobs), with --handler its workers too",
        description="Serve the HTTP API (POST /jobs, GET /jobs/ID, /stats, /healthz, /readyz, "
        "/openapi.json) and a live dashboard at / (the gauges, throughput, latency, the dead "
        "letters with requeue and purge, a job lookup) on Redis with --redis and --queue "
        "($TRIOQUEUE_REDIS_URL and $TRIOQUEUE_QUEUE), or on a queue in memory. With "
        "--handler, a worker pool runs the jobs in the same process (in memory it is "
        "needed: nothing else runs them, so without it serve asks for --memory). SIGTERM "
        "or SIGINT stops accepting, finishes requests in flight, then stops the pool; exit "
        "status 3: jobs were cut short or, in memory, lost.",
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
        "--ingest-token",
        metavar="TOKEN",
        help="the bearer token that sending jobs needs (default: $TRIOQUEUE_INGEST_TOKEN); "
        "once either token is set every write needs one (the admin token will do); without "
        "either, anyone may send plain jobs, and unique_key, debounce, after, rate_key, "
        "headers and priority are refused",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="bind to an address other hosts reach without a token (when a proxy in front "
        "guards the service): anyone who reaches it sends jobs and reads every job's payload "
        "and result",
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
    # from the environment as every command that stores jobs: a service in memory is
    # asked for by name (--memory), never the fallback of a variable not exported
    add_redis_url_options(serve)
    add_queue_option(serve)
    serve.add_argument(
        "--memory",
        action="store_true",
        help="keep the jobs in this process's memory, whatever $TRIOQUEUE_REDIS_URL says: "
        "they are lost when it stops, and without --handler nothing runs them (to try "
        "the API); without --redis, the variable or --handler, serve refuses to start",
    )
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
    from ._demo import run_demo  # lazily: imports tqdm

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
    from ._serve import run_serve

    return await run_serve(args)


async def _worker(args: argparse.Namespace) -> int:
    from ._worker import run_worker

    return await run_worker(args)
