"""``trioqueue serve``: the HTTP ingest service, and with ``--handler`` its workers too.

Seed 003's whole service in one command: HTTP → ingest → store → workers, with
the sweeper. The backend is in memory (one process) unless ``--redis`` names a
queue (or ``TRIOQUEUE_REDIS_URL`` does, as for every command). SIGTERM or SIGINT
stops accepting connections and lets requests in flight finish; then the pool
(if any) stops: on Redis with ``--grace`` for running handlers, every unfinished
job going back on the queue; in memory it is given ``--grace`` seconds to finish
every job accepted, and what is left is lost with the process (said in the log,
with the count, and exit status 3). In memory with no ``--handler`` nothing runs
the jobs: it starts so only when told ``--memory``, says so when it starts, and
counts them as lost when it stops.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
import socket
from typing import TYPE_CHECKING, Any, cast

import trio

from .._backends.memory._backend import MemoryBackend
from .._exceptions import BackendUnavailable
from .._pool._lifecycle import open_worker_pool
from .._retry import RetryPolicy
from ._loading import load_handler
from ._redis_args import redis_backend
from ._types import SERVE_MAX_MEMORY_MIB, UsageError

if TYPE_CHECKING:
    import argparse

    from .._backend import Backend
    from .._pool._handlers import Handlers
    from .._pool._worker_pool import WorkerPool
    from ..http._limits import Limits

__all__ = ["ADMIN_TOKEN_ENV", "INGEST_TOKEN_ENV", "run_serve"]

ADMIN_TOKEN_ENV = "TRIOQUEUE_ADMIN_TOKEN"
"""The environment variable ``trioqueue serve`` takes its admin token from."""
INGEST_TOKEN_ENV = "TRIOQUEUE_INGEST_TOKEN"
"""The environment variable ``trioqueue serve`` takes its ingest token from."""

logger = logging.getLogger("trioqueue.serve")


async def run_serve(args: argparse.Namespace) -> int:
    """Serve until a signal; return the exit status (0, or 3 if work was cut short)."""
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve

        from ..http import create_app
    except ImportError:
        raise UsageError(
            "trioqueue serve needs the http extra: pip install '.[http]' in the trioqueue checkout"
        ) from None
    token = args.admin_token or os.environ.get(ADMIN_TOKEN_ENV) or None
    ingest = args.ingest_token or os.environ.get(INGEST_TOKEN_ENV) or None
    host = args.bind.rpartition(":")[0].removeprefix("[").removesuffix("]")
    if token is None and ingest is None and not args.insecure and not _is_loopback(host):
        raise UsageError(
            f"--bind {args.bind} without a token lets anyone who reaches this machine "
            "send jobs and read every job's payload, result and error: give --ingest-token "
            f"or --admin-token (or {INGEST_TOKEN_ENV}, {ADMIN_TOKEN_ENV}), bind to "
            "127.0.0.1, or add --insecure if a proxy in front guards it"
        )
    if args.redis is None and not args.handler and not args.memory:
        raise UsageError(
            "no Redis and no --handler: the jobs would be kept in this process's memory, "
            "nothing in this process would run the jobs, and they would be lost when it "
            "stops. Give --redis URL and --queue NAME (or set TRIOQUEUE_REDIS_URL and "
            "TRIOQUEUE_QUEUE) to store them for workers of their own, --handler "
            "MODULE:HANDLER to run them here, or --memory to serve a queue in memory all "
            "the same (to try the API)"
        )
    if args.redis is not None and args.max_memory is not None:
        raise UsageError(
            "--max-memory bounds a queue in memory; on Redis, its own maxmemory does: "
            "leave --max-memory out, or --redis"
        )
    handler = load_handler(args.handler) if args.handler else None
    backend: Backend
    async with contextlib.AsyncExitStack() as stack:
        if args.redis is not None:
            backend = await stack.enter_async_context(redis_backend(args))
        else:
            max_memory = args.max_memory or SERVE_MAX_MEMORY_MIB
            backend = MemoryBackend(args.capacity or 1000, max_bytes=max_memory * 1024 * 1024)
        app = create_app(
            backend,
            max_body=args.max_body,
            concurrency=args.concurrency,
            request_timeout=args.request_timeout,
            admin_token=token,
            ingest_token=ingest,
            name=args.queue or "memory",
            tracebacks=args.tracebacks,
            allowed_hosts=_host_names(host, args.allowed_host),
        )
        config = Config()
        config.bind = [args.bind]
        config.accesslog = None
        # Hypercorn's own lines through its logger as the command set it up: once, and
        # quiet with -q (its default handler printed "Running on" a second time)
        config.errorlog = logging.getLogger("hypercorn.error")
        config.graceful_timeout = args.request_timeout  # requests in flight may finish
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                pool = None
                if handler is not None:
                    pool = await nursery.start(_run_pool, backend, handler, args)
                stop, served = trio.Event(), trio.Event()

                async def server(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                    try:  # Starlette's and Hypercorn's ASGI types differ only in spelling
                        asgi = cast("Any", app)
                        await serve(
                            asgi, config, shutdown_trigger=stop.wait, task_status=task_status
                        )
                    finally:
                        served.set()

                binds = await nursery.start(server)
                if args.redis is not None:
                    await _say_if_unreachable(backend)
                where = "Redis" if args.redis is not None else "memory"
                print(f"trioqueue serve: listening on {binds[0]} ({where} backend)", flush=True)
                if pool is None and isinstance(backend, MemoryBackend):
                    logger.warning(
                        "memory backend and no --handler: nothing in this process runs the "
                        "jobs it accepts, and they end with it; give --handler MODULE:HANDLER, "
                        "or --redis and --queue with workers of their own"
                    )
                async for signum in signals:
                    logger.info(
                        "%s: no new connections; finishing requests in flight",
                        signal.Signals(signum).name,
                    )
                    break
                # requests in flight finish; new ones, on kept-alive connections too, get 503
                cast("Limits", app).stop_accepting()
                stop.set()
                await served.wait()
                if pool is not None:
                    status = await _stop_pool(pool, backend, args)
                else:
                    status = await _unrun(backend)
                nursery.cancel_scope.cancel()
    return status


async def _say_if_unreachable(backend: Backend) -> None:
    """A WARNING at start when the backend does not answer within 2 s (serving goes on)."""
    try:
        with trio.move_on_after(2) as waited:
            await backend.pending()
    except BackendUnavailable as exc:
        detail = f"the backend at {exc.where} cannot take jobs now ({exc.detail})"
    else:
        if not waited.cancelled_caught:
            return
        detail = "Redis did not answer within 2 s"
    logger.warning(
        "%s; POST /jobs answers 503 and /readyz not ready until it is back; the service "
        "keeps trying",
        detail,
    )


def _is_loopback(host: str) -> bool:
    """Whether *host* (a name or an address) is this machine's loopback only."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_names(bind_host: str, given: list[str]) -> list[str]:
    """The names ``Host`` may give: *given*, localhost, the bind's and this machine's."""
    return ["localhost", bind_host, socket.gethostname(), *given]


async def _run_pool(
    backend: Backend,
    handler: Handlers,
    args: argparse.Namespace,
    task_status: trio.TaskStatus[WorkerPool],
) -> None:
    retry = RetryPolicy(max_attempts=args.max_attempts)
    async with open_worker_pool(backend, handler, workers=args.workers, retry=retry) as pool:
        task_status.started(pool)
        await pool.wait_stopped()


async def _unrun(backend: Backend) -> int:
    """With no pool here: 3, saying so, if a memory backend still holds jobs; else 0."""
    if not isinstance(backend, MemoryBackend):
        return 0  # on Redis the workers run them
    left = await backend.pending()
    if left:
        logger.warning(
            "%d accepted jobs were never run (no --handler) and are lost with the memory "
            "backend; give --handler, or use --redis",
            left,
        )
    return 3 if left else 0


async def _stop_pool(pool: WorkerPool, backend: Backend, args: argparse.Namespace) -> int:
    """Stop the pool after the HTTP side: see the module for what each backend keeps."""
    if isinstance(backend, MemoryBackend):
        pool.mark_producer_finished()
        if await backend.pending():  # say what the wait is for, not sit it out silently
            gauges = (await backend.stats()).gauges
            logger.info(
                "waiting up to --grace %g s for the jobs left: %d running, %d waiting to "
                "retry, %d waiting for a worker, %d due later; what is left then is lost "
                "with the memory backend",
                args.grace,
                gauges.inflight,
                gauges.retry_waiting,
                gauges.backlog,
                gauges.scheduled,
            )
        with trio.move_on_after(args.grace):
            await pool.wait_stopped()
        report = await pool.shutdown(0)
        left = await backend.pending()
        if left:
            logger.warning(
                "%d accepted jobs were not finished within --grace %g s; the memory backend "
                "keeps nothing past the process, so they are lost, those put back included "
                "(use --redis to keep them)",
                left,
                args.grace,
            )
        return 0 if not left and report.clean else 3
    report = await pool.shutdown(args.grace)
    logger.info(
        "stopped: %d handlers finished in the grace period, %d cancelled, %d jobs put back",
        report.finished,
        report.cancelled,
        report.released,
    )
    return 0 if report.clean else 3
