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
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
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
    "find_server_binary",
    "latency_round",
    "machine",
    "percentiles",
    "spread",
    "throughput_round",
    "write_results",
]

READY_SETTLE = 1.0  # seconds between a worker's "ready" and the first paced job


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


def _work_result(worker: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    out, err = worker.communicate(timeout=timeout)
    lines = out.strip().splitlines()
    if worker.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{worker.args} failed ({worker.returncode}):\n{err[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _wait_ready(worker: subprocess.Popen[str], timeout: float) -> None:
    assert worker.stdout is not None
    ready, _, _ = select.select([worker.stdout], [], [], timeout)
    line = worker.stdout.readline() if ready else ""
    if line.strip() != "ready":
        worker.kill()
        _, err = worker.communicate()
        raise RuntimeError(f"{worker.args} did not start:\n{line}{err[-3000:]}")


def throughput_round(
    url: str, script: str, variant: list[str], jobs: int, concurrency: int
) -> dict[str, Any]:
    """Workload 1: enqueue *jobs* no-op jobs, then time one worker process through them."""
    flush(url)
    subprocess.run(_adapter(script, "enqueue", url, jobs, variant), check=True, timeout=600)
    extra = [*variant, "--concurrency", str(concurrency), "--timeout", "300"]
    worker = subprocess.Popen(
        _adapter(script, "work", url, jobs, extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    result = _work_result(worker, timeout=330)
    seconds = result["last"] - result["started"]
    return {
        "jobs_per_s": (jobs - result["missing"]) / seconds,
        "duplicates": result["duplicates"],
        "missing": result["missing"],
    }


def latency_round(
    url: str, script: str, variant: list[str], jobs: int, rate: float, concurrency: int
) -> dict[str, Any]:
    """Workload 2: an idle worker, *jobs* enqueued at *rate*/s; enqueue -> handler start."""
    flush(url)
    extra = [*variant, "--concurrency", str(concurrency), "--timeout", "120"]
    worker = subprocess.Popen(
        _adapter(script, "work", url, jobs, extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_ready(worker, timeout=60)
        time.sleep(READY_SETTLE)  # let it reach its idle wait (a benchmark, not a test)
        command = _adapter(script, "enqueue", url, jobs, [*variant, "--rate", str(rate)])
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
    """What the figures were measured on."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def write_results(name: str, data: dict[str, Any], markdown: str) -> None:
    """Write ``results/<name>.json`` and ``results/<name>.md``."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)
    print(f"wrote {RESULTS / name}.json and .md", flush=True)
