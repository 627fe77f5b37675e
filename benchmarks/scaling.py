"""Cost against size: trioqueue's Redis worker through N and 10 x N jobs, side by side.

    python benchmarks/scaling.py [--jobs 20000] [--rounds 2]

The peer benchmark's I/O workload (one worker process, concurrency 32, each
handler one Redis round trip on its pool's connection) with N and with 10 x N
jobs queued before the worker starts, in turn within each round on one private
Redis. Prints, per round, how much longer 10 x N took than N (target: at most
10.5 x) and the worker's peak RSS for each (target: the same, since the jobs in
flight are bounded by the concurrency, not by the queue's length).
"""

from __future__ import annotations

import argparse
import statistics

from _common import RedisServer, find_server_binary, throughput_round

CONCURRENCY = 32
VARIANT = ["--variant", "reliable", "--handler-io", "redis"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    times, memory = [], []
    try:
        for n in range(1, args.rounds + 1):
            small = throughput_round(
                server.url, "run_trioqueue.py", VARIANT, args.jobs, CONCURRENCY
            )
            big = throughput_round(
                server.url, "run_trioqueue.py", VARIANT, 10 * args.jobs, CONCURRENCY
            )
            assert small["missing"] == big["missing"] == 0, (small, big)
            # time for 10 x N over time for N: rates are jobs / time
            times.append(10 * small["jobs_per_s"] / big["jobs_per_s"])
            memory.append(big["peak_rss_mib"] / small["peak_rss_mib"])
            print(
                f"round {n}: {args.jobs:,} jobs at {small['jobs_per_s']:,.0f}/s, peak "
                f"{small['peak_rss_mib']:.1f} MiB; {10 * args.jobs:,} at "
                f"{big['jobs_per_s']:,.0f}/s, peak {big['peak_rss_mib']:.1f} MiB; 10 x the "
                f"jobs took {times[-1]:.2f} x the time, {memory[-1]:.3f} x the peak memory",
                flush=True,
            )
    finally:
        server.close()
    print(
        f"median: 10 x the jobs took {statistics.median(times):.2f} x the time (target <= 10.5); "
        f"peak memory {statistics.median(memory):.3f} x (target: the same)"
    )


if __name__ == "__main__":
    main()
