"""What features a job does not use cost it: this tree against a baseline commit, side by side.

    python benchmarks/unused_cost.py [--baseline COMMIT] [--rounds 3] [--jobs 20000]

A job that uses no feature (no priority, delay, after=, unique_key, rate_key,
headers; no rate limit set; OpenTelemetry not installed) runs the same hot path
whatever features the code has. This runs one workload on the tree it lives in and
on a baseline commit (checked out into a temporary worktree), in turn within each
round, each in a fresh process, on one private Redis:

- ``memory``: a memory-backend pool of 32 workers, jobs/s, handler a 0-second sleep
  (a checkpoint: the job yields, as one doing I/O does), the producer in the same run;
- ``memory_io``: the same, each handler awaiting a loopback TCP round trip to an echo
  task of the same process (real I/O: a socket read and write per job);
- ``enqueue``: single `Queue.enqueue` calls on Redis, one job per call, jobs/s;
- ``redis``: a Redis pool (32 workers) through jobs queued beforehand, each handler one
  Redis GET through `current_redis()`, jobs/s.

Prints jobs/s of each and the ratio this tree / baseline per round, and the median;
a feature unused costs nothing when every median is at least 0.97. The machines are
shared and noisy: the ratios of one run are the figures to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import RedisServer, find_server_binary

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIGURES = ("memory", "memory_io", "enqueue", "redis")

WORKLOAD = HERE / "_unused_workload.py"  # run in a fresh process per tree and round


def run(tree: Path, jobs: int, url: str, queue: str) -> dict[str, float]:
    """The workload's jobs/s on the trioqueue of *tree*, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(WORKLOAD), str(jobs), url, queue],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"the workload failed on {tree}:\n{done.stderr}")
    rates: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="HEAD", help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    ratios: dict[str, list[float]] = {figure: [] for figure in FIGURES}
    with tempfile.TemporaryDirectory(prefix="trioqueue-baseline-") as scratch:
        base = Path(scratch) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
            check=True,
            capture_output=True,
        )
        try:
            for n in range(1, args.rounds + 1):
                # in turn, the first of the two alternating: neither always runs first
                order = [("baseline", base), ("this tree", ROOT)]
                if n % 2 == 0:
                    order.reverse()
                rates = {
                    name: run(tree, args.jobs, server.url, f"u{n}{name[0]}") for name, tree in order
                }
                for figure in FIGURES:
                    ratio = rates["this tree"][figure] / rates["baseline"][figure]
                    ratios[figure].append(ratio)
                    print(
                        f"round {n} {figure:>9}: baseline {rates['baseline'][figure]:>8,.0f}/s, "
                        f"this tree {rates['this tree'][figure]:>8,.0f}/s, ratio {ratio:.3f}"
                    )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False
            )
            server.stop()
    for figure in FIGURES:
        values = ratios[figure]
        print(
            f"{figure:>9}: median ratio {statistics.median(values):.3f} "
            f"(range {min(values):.3f}-{max(values):.3f}; at least 0.97 costs nothing)"
        )


if __name__ == "__main__":
    main()
