"""Peak memory of the memory backend after 100k and after 1M jobs (default retention).

    python benchmarks/memory_rss.py [--jobs 1000000] [--json]

Runs no-op jobs through MemoryBackend + open_worker_pool and prints the peak RSS
at each mark and their ratio (target: 1M <= 1.2 x 100k): with a retention of
10,000 finished records, memory must stop growing once that many have finished.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

import trio

import trioqueue

MARKS = (100_000, 1_000_000)


def peak_mib() -> float:
    """The process's peak resident set size so far, in MiB.

    On Linux, VmHWM from /proc: getrusage's ru_maxrss survives exec, so a
    process started by a large parent (bench.py, with matplotlib loaded) would
    report the parent's size.
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB; bytes on macOS
        return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024  # reported in kB


async def run(jobs: int) -> dict[int, float]:
    backend = trioqueue.MemoryBackend(capacity=256)
    queue = trioqueue.Queue(backend)
    peaks: dict[int, float] = {}

    async def handler(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(backend, handler, workers=32, prefetch=32):
        for i in range(1, jobs + 1):
            await queue.enqueue({"i": i})
            if i in MARKS:
                peaks[i] = peak_mib()
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=MARKS[-1])
    parser.add_argument("--json", action="store_true", help="print the peaks as JSON")
    args = parser.parse_args()
    peaks = trio.run(run, args.jobs)
    if args.json:
        print(json.dumps({str(mark): peak for mark, peak in peaks.items()}))
        return
    for mark, peak in peaks.items():
        print(f"peak RSS after {mark:,} jobs: {peak:.1f} MiB")
    if len(peaks) == len(MARKS):
        ratio = peaks[MARKS[1]] / peaks[MARKS[0]]
        print(f"ratio 1M / 100k: {ratio:.3f} (target <= 1.2)")


if __name__ == "__main__":
    main()
