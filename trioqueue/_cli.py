"""The ``trioqueue`` command line (``python -m trioqueue`` is the same)."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import TYPE_CHECKING

import attrs
import trio

from ._backends._memory import MemoryBackend
from ._exceptions import ConfigurationError
from ._metrics import COUNTER_NAMES
from ._pool import open_worker_pool
from ._queue import Queue
from ._retry import RetryPolicy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._metrics import MetricsSnapshot
    from ._records import Job

__all__ = ["main"]


class SimulatedFailure(Exception):
    """The failure ``trioqueue demo --fail-rate`` injects."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small: use 1 or more")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is out of range: use 0 to 1")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: use 0 or more")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trioqueue", description="A job queue for Trio.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run jobs with simulated failures through a pool and print the metrics",
        description="Enqueue --jobs jobs into an in-memory queue of --capacity, run them on "
        "--workers workers that fail at --fail-rate, retry with backoff, and print the report.",
    )
    demo.add_argument("--jobs", type=_positive_int, default=1000, help="jobs to enqueue")
    demo.add_argument("--workers", type=_positive_int, default=8, help="concurrent handlers")
    demo.add_argument("--capacity", type=_positive_int, default=64, help="ready-queue capacity")
    demo.add_argument("--fail-rate", type=_rate, default=0.2, help="chance an attempt fails")
    demo.add_argument("--max-attempts", type=_positive_int, default=4, help="attempts per job")
    demo.add_argument("--handler-ms", type=_non_negative, default=1.0, help="simulated work")
    demo.add_argument("--seed", type=int, default=None, help="seed for failures and jitter")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


async def _demo(args: argparse.Namespace) -> MetricsSnapshot:
    rng = random.Random(args.seed)
    backend = MemoryBackend(capacity=args.capacity)
    queue = Queue(backend)
    work = args.handler_ms / 1000

    async def handler(job: Job) -> None:
        await trio.sleep(work)
        if rng.random() < args.fail_rate:
            raise SimulatedFailure(f"simulated failure of job {job.id} attempt {job.attempt}")

    retry = RetryPolicy(max_attempts=args.max_attempts, base_delay=0.005, max_delay=0.2)
    async with open_worker_pool(
        backend, handler, workers=args.workers, retry=retry, seed=args.seed
    ):
        for i in range(args.jobs):
            await queue.enqueue({"i": i}, id=f"demo-{i}")
    return backend.metrics.snapshot()


def _report_lines(snap: MetricsSnapshot) -> list[str]:
    g = snap.gauges
    lines = [
        "counters: " + ", ".join(f"{name}={getattr(snap, name)}" for name in COUNTER_NAMES),
        f"gauges:   queue_depth={g.queue_depth}, backlog={g.backlog}, inflight={g.inflight}, "
        f"retry_waiting={g.retry_waiting}, dead={g.dead}",
    ]
    for name in ("queue_wait", "handler_time", "end_to_end"):
        h = getattr(snap, name)
        lines.append(
            f"{name + ':':<13} p50={h.p50 * 1000:.2f}ms p90={h.p90 * 1000:.2f}ms "
            f"p99={h.p99 * 1000:.2f}ms max={h.max * 1000:.2f}ms (n={h.count})"
        )
    verdict = "holds" if snap.conserved else "BROKEN"
    lines.append(
        f"conservation {verdict}: enqueued {snap.enqueued} + requeued {snap.dead_requeued} = "
        f"succeeded {snap.succeeded} + dead-lettered {snap.dead_lettered} + dropped "
        f"{snap.dropped} + held {g.held}"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        snap = trio.run(_demo, args)
    except ConfigurationError as exc:
        print(f"trioqueue: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trioqueue: interrupted", file=sys.stderr)
        return 130
    if args.json:
        data = attrs.asdict(snap)
        data["conserved"] = snap.conserved
        text = json.dumps(data, indent=2)
    else:
        text = "\n".join(_report_lines(snap))
    try:
        print(text, flush=True)
    except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
        # point stdout at devnull so the flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if snap.conserved else 1
