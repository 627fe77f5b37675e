"""trioqueue's own benchmarks, each against its floor, measured side by side in one run.

    python benchmarks/bench.py [--rounds 3] [--quick]

``nox -s bench`` runs this. Every figure is the median of --rounds runs with
its range; targets are ratios measured in the same run:

- memory backend: jobs/s of a pool against a bare Trio channel with 32 consumers
  (workload 5's floor; target ≥ 0.5);
- memory: peak RSS after 100k and after 1M jobs, in a process of its own
  (workload 4; target 1M ≤ 1.2 × 100k);
- Redis: trioqueue's reliable and simple modes through workloads 1 and 2 (the
  same adapter as ``peers.py``), against a bare BLMOVE+LREM loop;
- fail rate 0 / 0.1 / 0.3 × capacity 1 / 16 / 256 on memory and 16 / 256 on
  Redis: throughput and end-to-end latency, retries included (workload 3);
- the HTTP ingest path: ``POST /jobs`` on ``trioqueue serve`` (memory) against a
  bare Hypercorn endpoint, 50 clients (``ingest.py``; target ≥ 0.5);
- one logical queue on a local Redis Cluster of 3 masters: 1 shard against 3
  shards, several worker processes whose handlers make one Redis round trip
  (``shards.py``);
- delayed jobs on Redis: lateness (start - due time) on an idle worker and at
  1,000 due per second, beside the latency of jobs enqueued for at once
  (``lateness.py``; target: idle p99 < 10 ms).

Writes ``benchmarks/results/bench.json``, ``bench.md`` and ``failrate_capacity.png``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

import failrate_capacity
import ingest
import lateness
import memory_throughput
import shards
import trio
from _common import (
    HERE,
    RedisServer,
    find_server_binary,
    machine,
    spread,
    write_results,
)
from floors import bare_channel
from peers import CONCURRENCY, measure
from plots import sweep_plot

FAIL_RATES = (0.0, 0.1, 0.3)
CAPACITIES = {"memory": (1, 16, 256), "redis": (16, 256)}
OURS = ("trioqueue (reliable)", "trioqueue (simple)")


def memory_vs_channel(rounds: int, jobs: int) -> dict[str, Any]:
    floors, pools = [], []
    for n in range(1, rounds + 1):
        floors.append(trio.run(bare_channel, jobs, CONCURRENCY))
        pools.append(trio.run(memory_throughput.pool, jobs, CONCURRENCY))
        print(
            f"round {n}: bare channel {floors[-1]:,.0f} items/s, pool {pools[-1]:,.0f} jobs/s, "
            f"ratio {pools[-1] / floors[-1]:.3f}",
            flush=True,
        )
    ratios = [p / f for p, f in zip(pools, floors, strict=True)]
    median = statistics.median(ratios)
    return {
        "floor": spread(floors),
        "pool": spread(pools),
        "ratio": spread(ratios),
        "target": 0.5,
        "met": median >= 0.5,
    }


def rss(jobs: int) -> dict[str, Any]:
    command = [sys.executable, str(HERE / "memory_rss.py"), "--jobs", str(jobs), "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=1800)
    peaks = {int(mark): mib for mark, mib in json.loads(out.stdout).items()}
    print(f"peak RSS: {peaks}", flush=True)
    result: dict[str, Any] = {"peak_mib": peaks, "target": 1.2}
    if len(peaks) == 2:
        small, large = sorted(peaks)
        result["ratio"] = peaks[large] / peaks[small]
        result["met"] = result["ratio"] <= 1.2
    return result


def redis_workloads(url: str, rounds: int, jobs: int, latency_jobs: int) -> dict[str, Any]:
    measured = measure(url, list(OURS), rounds, jobs, latency_jobs, 500.0)
    return {"floor_blmove": measured["floor_blmove"], "systems": measured["systems"]}


def sweep(url: str, rounds: int, jobs: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    for backend, capacities in CAPACITIES.items():
        result[backend] = []
        for fail_rate in FAIL_RATES:
            for capacity in capacities:
                opener = (
                    failrate_capacity.memory(capacity)
                    if backend == "memory"
                    else failrate_capacity.redis(url, capacity)
                )
                runs = [
                    failrate_capacity.run(opener, jobs[backend], fail_rate) for _ in range(rounds)
                ]
                row = {
                    "fail_rate": fail_rate,
                    "capacity": capacity,
                    "jobs": jobs[backend],
                    "retries": runs[0]["retries"],
                    **{
                        key: spread([r[key] for r in runs])
                        for key in ("end_to_end_p50", "end_to_end_p99")
                    },
                    "throughput": spread([r["jobs_per_s"] for r in runs]),
                }
                result[backend].append(row)
                print(
                    f"{backend} fail rate {fail_rate} capacity {capacity}: "
                    f"{row['throughput']['median']:,.0f} jobs/s, end-to-end p50 "
                    f"{row['end_to_end_p50']['median'] * 1000:.1f} ms, p99 "
                    f"{row['end_to_end_p99']['median'] * 1000:.1f} ms",
                    flush=True,
                )
    return result


def _spread_text(s: dict[str, Any], scale: float = 1.0, digits: int = 0) -> str:
    return (
        f"{s['median'] * scale:,.{digits}f} "
        f"({s['min'] * scale:,.{digits}f}–{s['max'] * scale:,.{digits}f})"
    )


def markdown(data: dict[str, Any]) -> str:
    m, r = data["memory_vs_channel"], data["rss"]
    lines = [
        f"Measured {data['machine']['date']}, Python {data['machine']['python']}, "
        f"{data['machine']['cpus']} CPUs. Median of {data['settings']['rounds']} rounds "
        "(range in brackets).",
        "",
        "| figure | measured | target | met |",
        "|---|---|---|---|",
        f"| memory backend / bare Trio channel (32 consumers), jobs/s | "
        f"{_spread_text(m['ratio'], digits=3)} "
        f"({m['pool']['median']:,.0f} vs {m['floor']['median']:,.0f}/s) | ≥ 0.5 | "
        f"{'yes' if m['met'] else 'no'} |",
    ]
    if "ratio" in r:
        small, large = sorted(r["peak_mib"], key=int)
        lines.append(
            f"| peak RSS after {int(large):,} / after {int(small):,} jobs | {r['ratio']:.3f} "
            f"({r['peak_mib'][large]:.1f} / {r['peak_mib'][small]:.1f} MiB) | ≤ 1.2 | "
            f"{'yes' if r['met'] else 'no'} |"
        )
    redis = data["redis"]
    floor = redis["floor_blmove"]["median"]
    lines += [
        "",
        f"Redis, {data['settings']['jobs']:,} no-op jobs, one worker process, concurrency "
        f"{CONCURRENCY}; latency: {data['settings']['latency_jobs']:,} jobs at 500/s to an "
        "idle worker, enqueue → handler start:",
        "",
        "| mode | jobs/s | × BLMOVE floor | dup / missing | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in redis["systems"].items():
        lines.append(
            f"| {name} | {_spread_text(s['throughput'])} | "
            f"{s['throughput']['median'] / floor:.2f} | {s['duplicates']} / {s['missing']} | "
            f"{_spread_text(s['latency']['p50'], 1000, 1)} | "
            f"{_spread_text(s['latency']['p99'], 1000, 1)} |"
        )
    lines.append(
        f"| bare BLMOVE+LREM loop | {_spread_text(redis['floor_blmove'])} | 1.00 | – | – | – |"
    )
    lines += [
        "",
        f"Fail rate × capacity ({failrate_capacity.PRODUCERS} producers, "
        f"{failrate_capacity.WORKERS} workers, no prefetch, retries 1 ms doubling to 16 ms):",
        "",
        "| backend | capacity | fail rate | jobs/s | end-to-end p50 ms | p99 ms | retries |",
        "|---|---|---|---|---|---|---|",
    ]
    for backend, rows in data["sweep"].items():
        for row in rows:
            lines.append(
                f"| {backend} | {row['capacity']} | {row['fail_rate']:g} | "
                f"{_spread_text(row['throughput'])} | "
                f"{_spread_text(row['end_to_end_p50'], 1000, 2)} | "
                f"{_spread_text(row['end_to_end_p99'], 1000, 2)} | {row['retries']} |"
            )
    http = data.get("ingest")
    if http:
        lines += [
            "",
            f"HTTP ingest, {http['requests']:,} `POST /jobs` from {http['clients']} clients "
            "(kept-alive connections from a raw-socket client, one process), each server a "
            "process of its own:",
            "",
            "| server | requests/s | p50 ms | p99 ms |",
            "|---|---|---|---|",
            *(
                f"| {name} | {m['per_second']:,.0f} | {m['p50'] * 1000:.1f} | "
                f"{m['p99'] * 1000:.1f} |"
                for name, m in http["median"].items()
            ),
            f"| trioqueue serve / floor | {http['ratio_median']:.2f} "
            f"({http['ratio_range'][0]:.2f}–{http['ratio_range'][1]:.2f}); target ≥ "
            f"{http['target']} | {'met' if http['met'] else 'missed'} | |",
        ]
    sharded = data.get("shards")
    if sharded:
        used = ", ".join(
            f"{label}: {masters}" for label, masters in sharded["masters_used"].items()
        )
        lines += [
            "",
            f"One logical queue on a local Redis Cluster (3 masters, 3 replicas), "
            f"{sharded['jobs']:,} jobs, {sharded['processes']} worker processes × "
            f"{sharded['workers_per_process']} workers, handler: {sharded['handler']}; "
            f"masters serving the shards (last round): {used}:",
            "",
            "| layout | jobs/s |",
            "|---|---|",
            *(
                f"| {label} | {_spread_text(spread(rates))} |"
                for label, rates in sharded["rounds"].items()
            ),
            f"| 3 shards / 1 shard | {sharded['ratio_median']:.2f} "
            f"({sharded['ratio_range'][0]:.2f}–{sharded['ratio_range'][1]:.2f}) |",
        ]
    late = data.get("lateness")
    if late:
        met = late["ms"]["idle"]["p99"]["median"] < late["target_idle_p99_ms"]
        lines += [
            "",
            f"Delayed jobs on Redis: a pool of {late['workers']} workers in a process of its "
            f"own; handler: {late['handler']}. Idle: {late['idle_jobs']} jobs one at a time, "
            f"each sent while the pool waits; paced: {late['paced_jobs']:,} jobs due at "
            f"{late['rate_per_s']:,} per second, enqueued ahead; immediate: the same pacing "
            "without a delay (start - sent):",
            "",
            "| run | p50 ms | p99 ms | max ms |",
            "|---|---|---|---|",
            *(
                f"| {kind} | {m['p50']['median']:.1f} | {m['p99']['median']:.1f} "
                f"({m['p99']['min']:.1f}–{m['p99']['max']:.1f}) | {m['max']['median']:.1f} |"
                for kind, m in late["ms"].items()
            ),
            f"| target: idle p99 < {late['target_idle_p99_ms']:g} ms | | "
            f"{'met' if met else 'missed'} | |",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the jobs: checks the script, not speed"
    )
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    settings = {
        "rounds": args.rounds,
        "jobs": 20_000 // scale,
        "latency_jobs": 2_000 // scale,
        "rss_jobs": 1_000_000 // scale,
        "sweep_jobs": {"memory": 5_000 // scale, "redis": 2_000 // scale},
        "shard_jobs": 20_000 // scale,
        "ingest_requests": 5_000 // scale,
    }
    data: dict[str, Any] = {"machine": machine(), "settings": settings}
    data["memory_vs_channel"] = memory_vs_channel(args.rounds, settings["jobs"])
    data["rss"] = rss(settings["rss_jobs"])
    server = RedisServer(find_server_binary())
    server.start()
    try:
        data["redis"] = redis_workloads(
            server.url, args.rounds, settings["jobs"], settings["latency_jobs"]
        )
        data["sweep"] = sweep(server.url, args.rounds, settings["sweep_jobs"])
    finally:
        server.close()
    data["ingest"] = ingest.measure(args.rounds, settings["ingest_requests"])
    data["shards"] = shards.measure(args.rounds, settings["shard_jobs"], processes=3)
    data["lateness"] = lateness.measure(args.rounds, 3.0 / scale)
    write_results("bench", data, markdown(data))
    sweep_plot(data)
    print(markdown(data))


if __name__ == "__main__":
    main()
