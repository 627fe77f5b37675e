"""What the benchmark drivers share: a private Redis, adapter runs, summaries, results files.

Every figure is measured several times in one run and reported as the median
and the range (min to max): these machines are shared and noisy, so absolute
numbers drift and the ratios measured side by side are the figures to quote.
"""

from __future__ import annotations

import json
import os
import platform
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SYSTEMS = HERE / "systems"
sys.path.insert(0, str(HERE.parent / "tests"))
from redis_server import RedisServer, find_server_binary  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "RESULTS",
    "RedisServer",
    "deferred_round",
    "find_server_binary",
    "latency_round",
    "machine",
    "percentiles",
    "spread",
    "throughput_round",
    "write_results",
]

PACKAGES = (
    "trioqueue", "trio", "coredis", "saq", "taskiq", "taskiq-redis", "dramatiq", "arq",
    "streaq", "redis",
)  # fmt: skip
READY_SETTLE = 1.0  # seconds between a worker's "ready" and the first paced job
_ERRORS: dict[int, IO[str]] = {}  # each worker's stderr file, by pid


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median and range of repeated measurements, with the measurements."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": list(values),
    }


def percentiles(latencies: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and max of *latencies* (seconds), nearest-rank."""
    ordered = sorted(latencies)
    if not ordered:
        return {"p50": float("nan"), "p90": float("nan"), "p99": float("nan"), "max": float("nan")}

    def rank(q: float) -> float:
        return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[-1]}


def flush(url: str) -> None:
    """Empty the private server between runs (never the machine's shared one)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        if not sock.recv(64).startswith(b"+OK"):
            raise RuntimeError(f"FLUSHALL on {url} failed")


def _adapter(script: str, command: str, url: str, jobs: int, extra: Sequence[str]) -> list[str]:
    return [
        sys.executable, str(SYSTEMS / script), command, "--url", url, "--jobs", str(jobs), *extra,
    ]  # fmt: skip


def _start_worker(
    url: str, script: str, jobs: int, extra: Sequence[str], timeout: float
) -> subprocess.Popen[str]:
    """Start the adapter's ``work`` command; it ends itself by *timeout* at the latest.

    Its stderr goes to a file, so a talkative system can never block on a full pipe.
    """
    command = _adapter(script, "work", url, jobs, [*extra, "--timeout", str(timeout)])
    errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - read by _stderr, closed at exit
    worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    _ERRORS[worker.pid] = errors
    return worker


def _stderr(worker: subprocess.Popen[str]) -> str:
    """The last of what the worker wrote to its stderr."""
    errors = _ERRORS.get(worker.pid)
    if errors is None:
        return ""
    errors.seek(0)
    return errors.read()[-3000:]


def _work_result(worker: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    out, _ = worker.communicate(timeout=timeout)
    lines = out.strip().splitlines()
    if worker.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{worker.args} failed ({worker.returncode}):\n{_stderr(worker)}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _wait_ready(worker: subprocess.Popen[str], timeout: float) -> None:
    """Read the worker's "ready" line a byte at a time: nothing after it is consumed."""
    assert worker.stdout is not None
    fd = worker.stdout.fileno()
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    if line.strip() != b"ready":
        worker.kill()
        worker.wait()
        raise RuntimeError(f"{worker.args} did not start: {line!r}\n{_stderr(worker)}")


def throughput_round(
    url: str, script: str, variant: list[str], jobs: int, concurrency: int, warm: int = 0
) -> dict[str, Any]:
    """Workload 1: enqueue *jobs* no-op jobs, then time one worker process through them.

    Also returns the producer's rate: *jobs* over the adapter's own time for them.
    With *warm*, that many jobs go through a worker first, untimed, on the same
    queue: a queue in service, whose finished records have reached their bound.
    """
    flush(url)
    if warm:
        command = _adapter(script, "enqueue", url, warm, variant)
        subprocess.run(command, check=True, timeout=600, capture_output=True)
        extra = [*variant, "--concurrency", str(concurrency)]
        _work_result(_start_worker(url, script, warm, extra, 300), timeout=330)
    enqueued = subprocess.run(
        _adapter(script, "enqueue", url, jobs, variant),
        check=True, timeout=600, capture_output=True, text=True,
    )  # fmt: skip
    enqueue_seconds = json.loads(enqueued.stdout.strip().splitlines()[-1])["enqueue_seconds"]
    worker = _start_worker(url, script, jobs, [*variant, "--concurrency", str(concurrency)], 300)
    try:
        result = _work_result(worker, timeout=330)
    finally:
        if worker.poll() is None:
            worker.kill()
    ran = jobs - result["missing"]
    return {
        "jobs_per_s": ran / (result["last"] - result["started"]) if ran else 0.0,
        "enqueue_per_s": jobs / enqueue_seconds,
        "duplicates": result["duplicates"],
        "missing": result["missing"],
        "peak_rss_mib": result.get("peak_rss_mib"),
    }


def latency_round(
    url: str, script: str, variant: list[str], jobs: int, rate: float, concurrency: int
) -> dict[str, Any]:
    """Workload 2: an idle worker, *jobs* enqueued at *rate*/s; enqueue -> handler start."""
    return _idle_worker_round(url, script, variant, jobs, concurrency, ["--rate", str(rate)])


def deferred_round(
    url: str, script: str, variant: list[str], jobs: int, rate: float, lead: float
) -> dict[str, Any]:
    """Delayed jobs: *jobs* sent at once, due at *rate*/s from *lead* s on; start - due."""
    extra = ["--rate", str(rate), "--defer", str(lead)]
    found = _idle_worker_round(url, script, variant, jobs, 32, extra)
    del found["latencies"]
    return found


def _idle_worker_round(
    url: str, script: str, variant: list[str], jobs: int, concurrency: int, extra: list[str]
) -> dict[str, Any]:
    """Start a worker, let it go idle, run the enqueue command with *extra*; its latencies."""
    flush(url)
    worker = _start_worker(url, script, jobs, [*variant, "--concurrency", str(concurrency)], 120)
    try:
        _wait_ready(worker, timeout=60)
        time.sleep(READY_SETTLE)  # let it reach its idle wait (a benchmark, not a test)
        command = _adapter(script, "enqueue", url, jobs, [*variant, *extra])
        subprocess.run(command, check=True, timeout=600)
        result = _work_result(worker, timeout=150)
    finally:
        if worker.poll() is None:
            worker.kill()
    return {
        **percentiles(result["latencies"]),
        "duplicates": result["duplicates"],
        "missing": result["missing"],
        "latencies": result["latencies"],
    }


def machine() -> dict[str, Any]:
    """What the figures were measured on, and with which Redis server and packages."""
    binary = find_server_binary()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "redis_server": version.stdout.strip(),
        "packages": packages,
    }


def write_results(name: str, data: dict[str, Any], markdown: str) -> None:
    """Write ``results/<name>.json`` and ``results/<name>.md``."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)
    print(f"wrote {RESULTS / name}.json and .md", flush=True)
