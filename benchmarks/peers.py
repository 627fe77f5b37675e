"""trioqueue against other Redis job queues, on one private Redis, in one run.

    python benchmarks/peers.py [--rounds 3] [--jobs 20000] [--only NAME ...]

``nox -s bench_peers`` installs the peers and runs this. For every system, in
turn within each round (so drift on a shared machine hits all alike):

1. Throughput: enqueue --jobs no-op jobs, then one worker process with
   concurrency 32; jobs/s from the worker's start to its last handler start,
   every execution counted (duplicates and missing reported).
2. Latency: an idle worker, --latency-jobs jobs enqueued at --rate per second,
   every handler making one Redis round trip as in 3; enqueue to handler start,
   p50/p90/p99/max.
3. Throughput with I/O: as 1, but every handler makes one Redis round trip
   (a ``SET``) with the fastest client of its runtime (``systems/_round_trip.py``).
4. Enqueue: the producer's rate in workload 1 (one call per job), and once per
   round trioqueue's ``enqueue_many`` in batches of BULK_BATCH.

plus the floor, a bare BLMOVE+LREM loop with 32 tasks. Each system's adapter,
with its settings and why, is ``benchmarks/systems/run_<system>.py``. Writes
``benchmarks/results/peers.json``, ``peers.md`` and the plots.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import trio
from _common import (
    RedisServer,
    find_server_binary,
    latency_round,
    machine,
    spread,
    throughput_round,
    write_results,
)
from enqueue import bulk_rate
from floors import bare_blmove
from plots import peer_plots

SYSTEMS: dict[str, tuple[str, list[str]]] = {
    "trioqueue (reliable)": ("run_trioqueue.py", ["--variant", "reliable"]),
    "trioqueue (simple)": ("run_trioqueue.py", ["--variant", "simple"]),
    "saq": ("run_saq.py", []),
    "taskiq (list)": ("run_taskiq.py", ["--variant", "list"]),
    "taskiq (stream)": ("run_taskiq.py", ["--variant", "stream"]),
    "dramatiq": ("run_dramatiq.py", []),
    "arq": ("run_arq.py", []),
    "streaQ (trio)": ("run_streaq.py", ["--variant", "trio"]),
    "streaQ (asyncio)": ("run_streaq.py", ["--variant", "asyncio"]),
}
OURS = "trioqueue (reliable)"
CONCURRENCY = 32
ROUND_TRIP = ["--handler-io", "redis"]  # workload 3's handler
TARGETS = {"throughput": 3.0, "throughput_io": 1.5, "enqueue": 1.0, "enqueue_bulk": 10.0}
"""Ours / the best peer's, per round (enqueue_bulk: over the best peer's one-at-a-time)."""
LATENCY_TARGETS = {"p50": 0.001, "p99": 0.005}
"""trioqueue (reliable)'s latency at --rate jobs/s with a round trip per handler, seconds."""
BULK_BATCH = 500


def summarize(
    rounds: list[dict[str, Any]], io_rounds: list[dict[str, Any]], latencies: list[dict[str, Any]]
) -> dict[str, Any]:
    """One system's figures: each as the median and range over the rounds."""
    by_p50 = sorted(latencies, key=lambda r: r["p50"])
    typical = by_p50[len(by_p50) // 2]
    every = rounds + io_rounds + latencies
    return {
        "throughput": spread([r["jobs_per_s"] for r in rounds]),
        "enqueue": spread([r["enqueue_per_s"] for r in rounds]),
        "throughput_io": spread([r["jobs_per_s"] for r in io_rounds]),
        "duplicates": sum(r["duplicates"] for r in every),
        "missing": sum(r["missing"] for r in every),
        "latency": {q: spread([r[q] for r in latencies]) for q in ("p50", "p90", "p99", "max")},
        # the latencies of the round with the median p50, to 0.1 ms, for the plot
        "latency_sample": [round(x, 4) for x in sorted(typical["latencies"])],
    }


def targets(systems: dict[str, Any], ratios: dict[str, list[float]]) -> dict[str, Any]:
    """The issue's Redis targets, from this run's figures and per-round *ratios*."""
    # a system that lost jobs is no one's yardstick (its jobs/s counts only those that ran)
    peers = {
        name: s
        for name, s in systems.items()
        if not name.startswith("trioqueue") and s["missing"] == 0
    }
    if OURS not in systems or not peers:
        return {}
    ours = systems[OURS]
    best_p50 = min(s["latency"]["p50"]["median"] for s in peers.values())
    best_p99 = min(s["latency"]["p99"]["median"] for s in peers.values())
    return {
        **{
            f"{workload}_vs_best_peer": {
                "ratio": statistics.median(ratios[workload]),
                "range": [min(ratios[workload]), max(ratios[workload])],
                "target": target,
                "met": statistics.median(ratios[workload]) >= target,
            }
            for workload, target in TARGETS.items()
            if ratios[workload]
        },
        **{
            f"latency_{q}_vs_best_peer": {
                "ours": ours["latency"][q]["median"],
                "best_peer": best,
                "target": LATENCY_TARGETS[q],
                "met": ours["latency"][q]["median"] <= LATENCY_TARGETS[q],
            }
            for q, best in (("p50", best_p50), ("p99", best_p99))
        },
    }


def markdown(data: dict[str, Any]) -> str:
    """The results table, as the README and docs show it."""
    floor = data["floor_blmove"]["median"]
    rows = [
        f"Measured {data['machine']['date']}, Python {data['machine']['python']}, "
        f"{data['machine']['cpus']} CPUs; {data['settings']['jobs']:,} jobs, one worker "
        f"process with concurrency {CONCURRENCY}, each handler a no-op or one Redis round trip "
        f"(a `SET`: trioqueue's on its pool's connection, `current_redis()`; the peers' with "
        f"the fastest client of their runtime); latency: {data['settings']['latency_jobs']:,} "
        f"jobs, each handler making that round trip, at {data['settings']['rate']:g}/s to an "
        f"idle worker. Median of {data['settings']['rounds']} rounds (range in brackets).",
        "",
        "| system | jobs/s, no-op | jobs/s, one round trip | × BLMOVE floor (no-op) "
        "| enqueue jobs/s | dup / missing | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in sorted(data["systems"].items(), key=lambda kv: -kv[1]["throughput"]["median"]):
        t, io, lat = s["throughput"], s["throughput_io"], s["latency"]
        ms = [f"{lat[q]['median'] * 1000:.1f}" for q in ("p50", "p90", "p99", "max")]
        rows.append(
            f"| {name} | {_ranged(t)} | {_ranged(io)} | {t['median'] / floor:.2f} | "
            f"{_ranged(s['enqueue'])} | {s['duplicates']} / {s['missing']} | {' | '.join(ms)} |"
        )
    rows.append(
        f"| bare BLMOVE+LREM loop (floor) | {_ranged(data['floor_blmove'])} | – | 1.00 "
        "| – | – | – | – | – | – |"
    )
    if "enqueue_bulk" in data:
        rows += [
            "",
            f"trioqueue's `enqueue_many` in batches of {data['settings']['bulk_batch']}: "
            f"{_ranged(data['enqueue_bulk'])} jobs/s.",
        ]
    t = data["targets"]
    if t:
        p50, p99 = t["latency_p50_vs_best_peer"], t["latency_p99_vs_best_peer"]
        rows.append("")
        for key, what in (
            ("throughput", "throughput, no-op"),
            ("throughput_io", "throughput, one round trip"),
            ("enqueue", "enqueue one at a time"),
            ("enqueue_bulk", "enqueue_many over the peer's one at a time"),
        ):
            if f"{key}_vs_best_peer" in t:
                r = t[f"{key}_vs_best_peer"]
                rows.append(
                    f"- trioqueue (reliable) / best peer, {what}, per round: median "
                    f"{r['ratio']:.2f}× (range {r['range'][0]:.2f}–{r['range'][1]:.2f}); target ≥ "
                    f"{r['target']:g}×: {'met' if r['met'] else 'missed'}."
                )
        rows += [
            f"- Latency p50 {p50['ours'] * 1000:.1f} ms (target ≤ {p50['target'] * 1000:g} ms: "
            f"{'met' if p50['met'] else 'missed'}; best peer {p50['best_peer'] * 1000:.1f} ms); "
            f"p99 {p99['ours'] * 1000:.1f} ms (target ≤ {p99['target'] * 1000:g} ms: "
            f"{'met' if p99['met'] else 'missed'}; best peer {p99['best_peer'] * 1000:.1f} ms).",
        ]
    return "\n".join(rows) + "\n"


def _ranged(figure: dict[str, float]) -> str:
    return f"{figure['median']:,.0f} ({figure['min']:,.0f}–{figure['max']:,.0f})"


def _best_peer_ratio(
    got: dict[str, list[dict[str, Any]]], figure: str = "jobs_per_s", ours: float | None = None
) -> float | None:
    """This round's *ours* (trioqueue (reliable)'s *figure*) over the best peer's.

    Only peers that lost no job count.
    """
    peers = [
        runs[-1][figure]
        for name, runs in got.items()
        if "trioqueue" not in name and runs[-1]["missing"] == 0
    ]
    if OURS not in got or not peers:
        return None
    return float((got[OURS][-1][figure] if ours is None else ours) / max(peers))


def measure(
    url: str, names: list[str], rounds: int, jobs: int, latency_jobs: int, rate: float
) -> dict[str, Any]:
    """Workloads 1 to 3 for *names*, in turn within each round, and the BLMOVE floor.

    Returns the floor, each system's summary, and trioqueue (reliable)'s
    throughput over the best peer's in each round, per throughput workload
    (empty without both).
    """
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    got_io: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    latencies: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    floors: list[float] = []
    ratios: dict[str, list[float]] = {key: [] for key in TARGETS}
    bulk: list[float] = []
    for n in range(1, rounds + 1):
        floors.append(trio.run(bare_blmove, url, jobs, CONCURRENCY))
        print(f"round {n}: bare BLMOVE+LREM {floors[-1]:,.0f} items/s", flush=True)
        # a different system goes first in each round: no one always follows the same
        first = (n - 1) % len(names)
        for name in names[first:] + names[:first]:
            script, variant = SYSTEMS[name]
            got[name].append(throughput_round(url, script, variant, jobs, CONCURRENCY))
            with_io = [*variant, *ROUND_TRIP]
            io = throughput_round(url, script, with_io, jobs, CONCURRENCY)
            got_io[name].append(io)
            lat = latency_round(url, script, with_io, latency_jobs, rate, CONCURRENCY)
            latencies[name].append(lat)
            print(
                f"round {n}: {name}: enqueue {got[name][-1]['enqueue_per_s']:,.0f} jobs/s; "
                f"{got[name][-1]['jobs_per_s']:,.0f} jobs/s "
                f"(dup {got[name][-1]['duplicates']}, missing {got[name][-1]['missing']}); "
                f"one round trip {io['jobs_per_s']:,.0f} jobs/s "
                f"(dup {io['duplicates']}, missing {io['missing']}); "
                f"latency p50 {lat['p50'] * 1000:.1f} ms, p99 {lat['p99'] * 1000:.1f} ms",
                flush=True,
            )
        bulk.append(trio.run(bulk_rate, url, jobs, BULK_BATCH, f"{{bulk{n}}}"))
        print(f"round {n}: trioqueue enqueue_many({BULK_BATCH}) {bulk[-1]:,.0f} jobs/s")
        for key, ratio in (
            ("throughput", _best_peer_ratio(got)),
            ("throughput_io", _best_peer_ratio(got_io)),
            ("enqueue", _best_peer_ratio(got, "enqueue_per_s")),
            ("enqueue_bulk", _best_peer_ratio(got, "enqueue_per_s", ours=bulk[-1])),
        ):
            if ratio is not None:
                ratios[key].append(ratio)
    return {
        "floor_blmove": spread(floors),
        "enqueue_bulk": spread(bulk),
        "systems": {name: summarize(got[name], got_io[name], latencies[name]) for name in names},
        "ratios": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--latency-jobs", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--only", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    url = server.url
    try:
        measured = measure(url, args.only, args.rounds, args.jobs, args.latency_jobs, args.rate)
    finally:
        server.close()
    systems = measured["systems"]
    data: dict[str, Any] = {
        "machine": machine(),
        "settings": {
            "rounds": args.rounds,
            "jobs": args.jobs,
            "latency_jobs": args.latency_jobs,
            "rate": args.rate,
            "concurrency": CONCURRENCY,
            "bulk_batch": BULK_BATCH,
        },
        "floor_blmove": measured["floor_blmove"],
        "enqueue_bulk": measured["enqueue_bulk"],
        "systems": systems,
        "targets": targets(systems, measured["ratios"]),
    }
    write_results("peers", data, markdown(data))
    peer_plots(data)
    print(markdown(data))


if __name__ == "__main__":
    main()
