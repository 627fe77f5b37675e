"""Cost against size: trioqueue's Redis worker through N and 10 x N jobs, side by side.

    python benchmarks/scaling.py [--jobs 20000] [--rounds 2] [--warm 10000]
                                 [--only trioqueue "taskiq (list)"]

The peer benchmark's I/O workload (one worker process, concurrency 32, each
handler one Redis round trip on its pool's connection) with N and with 10 x N
jobs queued before the worker starts, in turn within each round on one private
Redis. Prints, per round, how much longer 10 x N took than N (target: at most
10.5 x) and the worker's peak RSS for each (target: the same, since the jobs in
flight are bounded by the concurrency, not by the queue's length). The best peer
of the peer benchmark runs the same two sizes in each round, for comparison.

Each run starts on a queue in service: --warm jobs (by default the default
retention's 10,000) went through it first, untimed, so its finished records are
at their bound and every finished job of both runs lets an old record go. From an
empty queue (--warm 0) the first 10,000 finished jobs of a run delete nothing:
N pays for that work on half of its jobs, 10 x N on 95 % of them.
"""

from __future__ import annotations

import argparse
import statistics

from _common import RedisServer, find_server_binary, throughput_round

CONCURRENCY = 32
SYSTEMS = {
    "trioqueue": ("run_trioqueue.py", ["--variant", "reliable", "--handler-io", "redis"]),
    # the peer with the best throughput in the peer benchmark, on the same workload: a
    # ratio over 10.5 on both is the machine's (a larger Redis, a longer run), not ours
    "taskiq (list)": ("run_taskiq.py", ["--variant", "list", "--handler-io", "redis"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warm", type=int, default=10_000)
    parser.add_argument("--only", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    times: dict[str, list[float]] = {name: [] for name in args.only}
    memory: dict[str, list[float]] = {name: [] for name in args.only}
    try:
        for n in range(1, args.rounds + 1):
            for name in args.only:
                script, variant = SYSTEMS[name]
                small = throughput_round(
                    server.url, script, variant, args.jobs, CONCURRENCY, args.warm
                )
                big = throughput_round(
                    server.url, script, variant, 10 * args.jobs, CONCURRENCY, args.warm
                )
                assert small["missing"] == big["missing"] == 0, (small, big)
                # time for 10 x N over time for N: rates are jobs / time
                times[name].append(10 * small["jobs_per_s"] / big["jobs_per_s"])
                memory[name].append(big["peak_rss_mib"] / small["peak_rss_mib"])
                print(
                    f"round {n}: {name}: {args.jobs:,} jobs at {small['jobs_per_s']:,.0f}/s, "
                    f"peak {small['peak_rss_mib']:.1f} MiB; {10 * args.jobs:,} at "
                    f"{big['jobs_per_s']:,.0f}/s, peak {big['peak_rss_mib']:.1f} MiB; 10 x the "
                    f"jobs took {times[name][-1]:.2f} x the time, "
                    f"{memory[name][-1]:.3f} x the peak memory",
                    flush=True,
                )
    finally:
        server.close()
    for name in args.only:
        print(
            f"median, {name}: 10 x the jobs took {statistics.median(times[name]):.2f} x the "
            f"time (target <= 10.5); peak memory {statistics.median(memory[name]):.3f} x "
            "(target: the same)"
        )


if __name__ == "__main__":
    main()
