"""What one worker of a pool costs in memory, against a bare Trio task doing the same wait.

    python benchmarks/worker_memory.py [--workers 50000]

Each worker of `open_worker_pool` is one Trio task waiting on the pool's
channel. This starts a pool of --workers idle workers on the memory backend,
then --workers bare tasks each waiting on a memory channel inside a cancel
scope, each in a fresh process, and prints the resident memory each added per
task and the ratio of the two (1.0: a worker costs what any waiting task costs).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import trio

import trioqueue


def rss_mib() -> float:
    """This process's resident set size now, in MiB (VmRSS)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status: this measures on Linux only")


async def _idle(job: trioqueue.Job) -> None:
    """Never called: no job is enqueued."""


async def pool_of(workers: int) -> float:
    """MiB a pool of *workers* idle workers adds."""
    backend = trioqueue.MemoryBackend(capacity=10)
    before = rss_mib()
    async with trioqueue.open_worker_pool(backend, _idle, workers=workers) as pool:
        await trio.sleep(0.5)  # every worker started and waiting
        during = rss_mib()
        await pool.shutdown(0)
    return during - before


async def bare_tasks(tasks: int) -> float:
    """MiB that *tasks* bare tasks add, each waiting on a channel in a cancel scope."""

    async def wait(receive: trio.MemoryReceiveChannel[object]) -> None:
        with trio.CancelScope():
            async for _ in receive:
                pass

    send, receive = trio.open_memory_channel[object](10)
    before = rss_mib()
    async with send, trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(wait, receive)
        await trio.sleep(0.5)
        during = rss_mib()
        nursery.cancel_scope.cancel()
    return during - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=50_000)
    parser.add_argument("--which", choices=["pool", "bare"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.which is not None:  # one measurement, in a process of its own
        measure = pool_of if args.which == "pool" else bare_tasks
        print(trio.run(measure, args.workers))
        return
    added = {}
    for which in ("pool", "bare"):
        command = [sys.executable, __file__, "--workers", str(args.workers), "--which", which]
        added[which] = float(
            subprocess.run(command, capture_output=True, text=True, check=True).stdout
        )
    per = {which: mib * 1024 / args.workers for which, mib in added.items()}
    print(f"{args.workers:,} pool workers: {added['pool']:.1f} MiB, {per['pool']:.2f} KiB each")
    print(f"{args.workers:,} bare tasks:   {added['bare']:.1f} MiB, {per['bare']:.2f} KiB each")
    print(f"ratio worker / bare task: {per['pool'] / per['bare']:.3f}")


if __name__ == "__main__":
    main()
