"""Delayed jobs beside the peers that have them: lateness (start - due time) on Redis.

    python benchmarks/deferred_peers.py [--rounds 3] [--jobs 3000] [--rate 1000]

Each system's own way of running a job later: trioqueue's ``enqueue(at=...)``,
arq's ``enqueue_job(_defer_until=...)`` and saq's ``Job(scheduled=...)``. Every job
is sent ahead, due at ``--rate`` per second from 2 s after the first send (after
every send has landed); one worker process (concurrency 32, each system's adapter
in ``benchmarks/systems``, no-op handler) records each start. The systems take
turns within each round, on one private Redis. Figures are p50/p99 of start - due
time in milliseconds: median and range over the rounds. Writes
``benchmarks/results/deferred.json`` and ``deferred.md``; ``nox -s bench_peers``
runs it after ``peers.py``.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from _common import RedisServer, deferred_round, find_server_binary, machine, write_results

SYSTEMS: dict[str, tuple[str, list[str]]] = {
    "trioqueue (reliable)": ("run_trioqueue.py", ["--variant", "reliable"]),
    "arq": ("run_arq.py", []),
    "saq": ("run_saq.py", []),
}
LEAD = 2.0  # seconds from the first send to the first due time


def measure(url: str, rounds: int, jobs: int, rate: float) -> dict[str, Any]:
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in SYSTEMS}
    names = list(SYSTEMS)
    for n in range(1, rounds + 1):
        first = (n - 1) % len(names)
        for name in names[first:] + names[:first]:
            script, variant = SYSTEMS[name]
            found = deferred_round(url, script, variant, jobs, rate, LEAD + jobs / 5_000)
            got[name].append(found)
            print(
                f"round {n}: {name}: p50 {found['p50'] * 1000:.1f} ms, p99 "
                f"{found['p99'] * 1000:.1f} ms, max {found['max'] * 1000:.1f} ms "
                f"(dup {found['duplicates']}, missing {found['missing']})",
                flush=True,
            )
    return {
        name: {
            key: {
                "median": statistics.median(r[key] * 1000 for r in runs),
                "min": min(r[key] * 1000 for r in runs),
                "max": max(r[key] * 1000 for r in runs),
            }
            for key in ("p50", "p99", "max")
        }
        | {
            "duplicates": sum(r["duplicates"] for r in runs),
            "missing": sum(r["missing"] for r in runs),
        }
        for name, runs in got.items()
    }


def markdown(data: dict[str, Any]) -> str:
    s = data["settings"]
    lines = [
        f"Measured {data['machine']['date']}, Python {data['machine']['python']}, "
        f"{data['machine']['cpus']} CPUs; {s['jobs']:,} delayed jobs per run, due at "
        f"{s['rate']:,.0f} per second, all sent ahead; one worker process, concurrency 32, "
        f"no-op handler. Lateness = start - due time, ms; median of {s['rounds']} rounds "
        "(range in brackets).",
        "",
        "| system | p50 ms | p99 ms | max ms | dup / missing |",
        "|---|---|---|---|---|",
    ]
    for name, f in data["systems"].items():
        lines.append(
            f"| {name} | {f['p50']['median']:.1f} ({f['p50']['min']:.1f}–{f['p50']['max']:.1f}) "
            f"| {f['p99']['median']:.1f} ({f['p99']['min']:.1f}–{f['p99']['max']:.1f}) "
            f"| {f['max']['median']:.1f} | {f['duplicates']} / {f['missing']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=3_000)
    parser.add_argument("--rate", type=float, default=1_000.0)
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    try:
        systems = measure(server.url, args.rounds, args.jobs, args.rate)
    finally:
        server.close()
    data = {
        "machine": machine(),
        "settings": {"rounds": args.rounds, "jobs": args.jobs, "rate": args.rate, "lead": LEAD},
        "systems": systems,
    }
    write_results("deferred", data, markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
