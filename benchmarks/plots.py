"""PNG plots of the benchmark results (matplotlib, no display needed)."""

from __future__ import annotations

from typing import Any

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt
from _common import RESULTS
from failrate_capacity import PRODUCERS, WORKERS

OURS_COLOUR = "#1f6fb2"
PEER_COLOUR = "#9a9a9a"


def _save(figure: Any, name: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    figure.tight_layout()
    figure.savefig(RESULTS / name, dpi=110)
    plt.close(figure)
    print(f"wrote {RESULTS / name}", flush=True)


def peer_plots(data: dict[str, Any]) -> None:
    """``peers_throughput.png`` (bars with ranges, two workloads), ``peers_latency.png`` (CDFs)."""
    systems = sorted(data["systems"].items(), key=lambda kv: kv[1]["throughput"]["median"])
    names = [name for name, _ in systems]
    colours = [OURS_COLOUR if n.startswith("trioqueue") else PEER_COLOUR for n in names]
    figure, panels = plt.subplots(1, 2, figsize=(12, 0.45 * len(names) + 1.6), sharey=True)
    titles = {"throughput": "no-op handler", "throughput_io": "one Redis round trip per handler"}
    for axes, (key, title) in zip(panels, titles.items(), strict=True):
        medians = [s[key]["median"] for _, s in systems]
        low = [s[key]["median"] - s[key]["min"] for _, s in systems]
        high = [s[key]["max"] - s[key]["median"] for _, s in systems]
        axes.barh(names, medians, xerr=[low, high], color=colours, capsize=3)
        axes.set_title(f"Throughput on Redis, {title}", fontsize=10)
        axes.set_xlabel(
            f"jobs/s, one worker process, concurrency {data['settings']['concurrency']}\n"
            f"(median of {data['settings']['rounds']}, bars: range)"
        )
    floor = data["floor_blmove"]["median"]
    panels[0].axvline(floor, color="black", linestyle="--", linewidth=1)
    panels[0].annotate(
        "bare BLMOVE+LREM", (floor, len(names) - 0.5), fontsize=8, ha="left", va="bottom"
    )
    _save(figure, "peers_throughput.png")

    figure, axes = plt.subplots(figsize=(8, 5))
    for name, s in sorted(
        data["systems"].items(), key=lambda kv: kv[1]["latency"]["p50"]["median"]
    ):
        sample = [max(x, 1e-4) * 1000 for x in s["latency_sample"]]
        if not sample:
            continue
        fractions = [(k + 1) / len(sample) for k in range(len(sample))]
        ours = name.startswith("trioqueue")
        axes.step(sample, fractions, where="post", label=name, linewidth=2.2 if ours else 1.2)
    axes.set_xscale("log")
    axes.set_xlabel("enqueue → handler start, ms (log scale)")
    axes.set_ylabel("fraction of jobs")
    axes.set_title(
        f"Latency at {data['settings']['rate']:g} jobs/s to an idle worker (median round)"
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    _save(figure, "peers_latency.png")


def sweep_plot(data: dict[str, Any]) -> None:
    """``failrate_capacity.png``: throughput and end-to-end latency across the sweep."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for backend, rows in data["sweep"].items():
        for capacity in sorted({r["capacity"] for r in rows}):
            points = sorted(
                (r for r in rows if r["capacity"] == capacity), key=lambda r: r["fail_rate"]
            )
            x = [r["fail_rate"] for r in points]
            label = f"{backend}, capacity {capacity}"
            style = "-" if backend == "memory" else "--"
            (line,) = left.plot(
                x, [r["throughput"]["median"] for r in points], style, marker="o", label=label
            )
            colour = line.get_color()  # the same configuration in the same colour on the right
            right.plot(
                x, [r["end_to_end_p50"]["median"] * 1000 for r in points], style, marker="o",
                color=colour, label=f"{label}: p50 (o), p99 (x)",
            )  # fmt: skip
            right.plot(
                x, [r["end_to_end_p99"]["median"] * 1000 for r in points], style, marker="x",
                color=colour, alpha=0.5,
            )  # fmt: skip
    left.set_yscale("log")
    left.set_xlabel("fail rate per attempt")
    left.set_ylabel("jobs/s (log scale)")
    left.set_title(f"Throughput, {PRODUCERS} producers, {WORKERS} workers")
    left.legend(fontsize=7)
    right.set_yscale("log")
    right.set_xlabel("fail rate per attempt")
    right.set_ylabel("enqueue → completion, ms (log scale)")
    right.set_title("End-to-end latency, retries included")
    right.legend(fontsize=7)
    for axes in (left, right):
        axes.set_xticks([0.0, 0.1, 0.3])
        axes.grid(True, which="both", alpha=0.3)
    _save(figure, "failrate_capacity.png")
