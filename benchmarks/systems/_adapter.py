"""What every system's benchmark adapter shares: its command line and its recorder.

An adapter is a script ``run_<system>.py`` that calls :func:`main` with two
functions of its own:

``enqueue(args)``
    Enqueue ``args.jobs`` no-op jobs on the queue at ``args.url``, in order, with
    the payload ``args.payload(i)``, one call per job, as a producer that has one
    job at a time would. When ``args.rate`` is set, wait ``args.delay(i)``
    seconds (in the system's own event loop) before job *i*, so the jobs go out
    at that rate. Returns when every job is in Redis; :func:`main` then prints
    how long it took, as JSON (``enqueue_seconds``). With ``args.defer`` (the
    systems that run a job later, ``DEFERRED`` in ``peers.py``), send every job at
    once, each due at ``args.due(i)`` (seconds since the epoch): the jobs come due
    at ``args.rate`` per second, starting ``args.defer`` seconds from now, and the
    latency recorded is the lateness (start - due time).

``work(args, recorder)``
    Run one worker of the system with ``args.concurrency`` jobs at a time, in
    this process, in its fastest sensible configuration. Its handler calls
    ``recorder.record(payload)`` first thing. Call ``recorder.start()`` right
    before the worker starts taking jobs (after imports and set-up). The
    recorder ends the process once every job has run and a short settle time
    has passed (to catch duplicates), or at ``args.timeout``: ``work`` need not
    return. With ``--handler-io redis`` the handler then makes one Redis round
    trip with the client ``_round_trip.py`` gives its runtime.

The driver (``benchmarks/peers.py``) runs ``run_<system>.py enqueue ...`` and
``run_<system>.py work ...`` as separate processes and reads the JSON the
``work`` process prints as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

SETTLE = 0.5  # seconds after the last job's first run, to see any duplicate


class Args(argparse.Namespace):
    """The parsed command line, plus the payload and pacing every adapter uses."""

    command: str
    url: str
    queue: str
    jobs: int
    rate: float | None
    concurrency: int
    timeout: float
    variant: str
    handler_io: str
    defer: float | None

    def payload(self, i: int) -> dict[str, Any]:
        """Job *i*'s payload: ``{"i": i}``, plus its enqueue time (or due time) when paced."""
        if self.rate is None:
            return {"i": i}
        if self.defer is not None:  # its due time on CLOCK_MONOTONIC: the lateness counts
            return {"i": i, "t": time.monotonic() + self.due(i) - time.time()}
        return {"i": i, "t": time.monotonic()}  # CLOCK_MONOTONIC: one clock per machine

    def due(self, i: int) -> float:
        """With ``defer``: when job *i* is due, in seconds since the epoch."""
        assert self.defer is not None
        assert self.rate is not None
        if not hasattr(self, "_first_due"):
            self._first_due = time.time() + self.defer
        return self._first_due + i / self.rate

    def delay(self, i: int) -> float:
        """Seconds to wait before enqueueing job *i* so that jobs go out at ``rate``."""
        if self.rate is None or self.defer is not None:
            return 0.0
        if i == 0:
            self._t0 = time.monotonic()
        return max(0.0, self._t0 + i / self.rate - time.monotonic())


def peak_rss_mib() -> float | None:
    """This process's peak resident set size so far (Linux's VmHWM), in MiB; None elsewhere."""
    try:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) / 1024


class Recorder:
    """Counts every execution of every job, and the latency of paced ones; thread-safe."""

    def __init__(self, jobs: int, timeout: float) -> None:
        self.counts = [0] * jobs
        self.latencies: list[float] = []
        self.distinct = 0
        self.started: float | None = None
        self.last: float | None = None
        self._lock = threading.Lock()
        self._timeout = timeout

    def start(self) -> None:
        """Mark the worker's start; the driver may begin paced enqueueing after this."""
        self.started = time.monotonic()
        print("ready", flush=True)
        timer = threading.Timer(self._timeout, self.finish)
        timer.daemon = True
        timer.start()

    def record(self, payload: Mapping[str, Any]) -> None:
        """Called by the handler, first thing, with the job's payload."""
        now = time.monotonic()
        with self._lock:
            i = payload["i"]
            self.counts[i] += 1
            self.last = now
            if "t" in payload:
                self.latencies.append(now - payload["t"])
            if self.counts[i] == 1:
                self.distinct += 1
                if self.distinct == len(self.counts):
                    timer = threading.Timer(SETTLE, self.finish)
                    timer.daemon = True
                    timer.start()

    def finish(self) -> None:
        """Print the result as one JSON line and end the process at once."""
        with self._lock:
            result = {
                "peak_rss_mib": peak_rss_mib(),
                "started": self.started,
                "last": self.last,
                "runs": sum(self.counts),
                "missing": self.counts.count(0),
                "duplicates": sum(c - 1 for c in self.counts if c > 1),
                "latencies": self.latencies,
            }
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        os._exit(0)  # the worker is not ours to stop politely; its state is thrown away


def main(
    enqueue: Callable[[Args], None],
    work: Callable[[Args, Recorder], None],
    variants: tuple[str, ...] = ("default",),
) -> None:
    """Parse the command line and run ``enqueue`` or ``work``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("enqueue", "work"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", default="bench")
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--rate", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--variant", choices=variants, default=variants[0])
    parser.add_argument("--handler-io", choices=("none", "redis"), default="none")
    parser.add_argument("--defer", type=float, default=None, help="seconds before the first due")
    args = parser.parse_args(namespace=Args())
    if args.command == "enqueue":
        start = time.monotonic()  # after the imports: connecting and every enqueue call
        enqueue(args)
        print(json.dumps({"enqueue_seconds": time.monotonic() - start}), flush=True)
    else:
        recorder = Recorder(args.jobs, args.timeout)
        work(args, recorder)
        recorder.finish()  # a worker that returned on its own: report what it did
