"""Crash test: jobs through several ``trioqueue worker`` processes while faults hit them.

    python tests/chaos.py [--jobs 2000] [--workers 3] [--deadline 170] [--json]

On a private Redis (appendonly, fsync always) it enqueues ``--jobs`` jobs of
random duration plus a few poison jobs (whose handler kills its own process),
runs them on ``--workers`` worker processes, and meanwhile: SIGKILLs a random
worker about every second and starts a replacement; SIGTERMs one (the graceful
path); restarts Redis once, starting a worker while it is down. Every execution
is logged by the handler (``chaos_handlers.py``). It reports completed, lost,
duplicated, the slowest recovery after a SIGKILL and the time from the last
fault to the last completion, and exits 1 when a target is missed:

- lost = 0;
- every duplicate follows a crash (SIGKILL or poison), and there are at most as
  many as the crashed workers could hold (workers x (concurrency + prefetch));
- a SIGKILLed worker's jobs run again within min_idle + 1 s (kills whose
  recovery window overlaps the Redis outage are not timed);
- each poison job is a dead letter, for max_deliveries, and nothing else is;
- the worker started while Redis was down logged that and then did work;
- the queue's counters are conserved, and every job succeeded exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import trio

import trioqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from redis_server import RedisServer, find_server_binary  # noqa: E402

MIN_IDLE = 1.0
SWEEP = 0.25
PREFETCH = 0
MAX_ATTEMPTS = 3
MAX_DELIVERIES = 6  # above max_attempts, and the claims a SIGKILL storm wastes
QUEUE = "{chaos}"
POISON_EXIT = 13  # the status a poison job's os._exit gives (chaos_handlers.py)
OUTAGE = 1.0  # seconds Redis stays down in its restart


class Fleet:
    """The worker processes: started, killed, replaced; how each one ended."""

    def __init__(self, url: str, workdir: Path, log: Path, concurrency: int, capacity: int) -> None:
        self.url, self.workdir, self.log, self.concurrency = url, workdir, log, concurrency
        self.capacity = capacity  # as the producer's: every user of a queue must agree
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.ended: dict[int, str] = {}  # pid -> sigkill, sigterm, crashed, stopped
        self.surprises: list[str] = []  # a worker that ended in a way no fault explains
        self.ended_at: dict[int, float] = {}
        self.stderr: dict[int, Path] = {}

    def command(self, n: int) -> list[str]:
        """The command line of the *n*-th worker started."""
        return [
            sys.executable, "-m", "trioqueue", "worker", "chaos_handlers:run",
            "--redis", self.url, "--queue", QUEUE, "--capacity", str(self.capacity),
            "--workers", str(self.concurrency), "--prefetch", str(PREFETCH),
            "--min-idle", str(MIN_IDLE), "--sweep-interval", str(SWEEP),
            "--max-attempts", str(MAX_ATTEMPTS), "--max-deliveries", str(MAX_DELIVERIES),
            "--grace", "10",
        ]  # fmt: skip

    def start(self) -> int:
        err = self.workdir / f"worker-{len(self.stderr)}.err"
        command = self.command(len(self.stderr))
        with err.open("wb") as stderr:
            process = subprocess.Popen(
                command,
                cwd=HERE,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, "CHAOS_LOG": str(self.log)},
            )
        self.live[process.pid] = process
        self.stderr[process.pid] = err
        return process.pid

    def stop(self, pid: int, signum: int, how: str) -> None:
        process = self.live.pop(pid)
        process.send_signal(signum)
        status = process.wait(timeout=60)
        self.ended[pid], self.ended_at[pid] = how, time.time()
        if signum == signal.SIGTERM and status not in (0, 3):  # clean, or handlers cancelled
            self.surprises.append(f"worker {pid} exited {status} after SIGTERM")

    def reap(self) -> int:
        """Note workers that died by themselves (a poison job) and replace them."""
        replaced = 0
        for pid, process in list(self.live.items()):
            status = process.poll()
            if status is not None:
                del self.live[pid]
                self.ended[pid], self.ended_at[pid] = "crashed", time.time()
                if status != POISON_EXIT:  # not a poison job: a bug
                    self.surprises.append(f"worker {pid} died by itself with status {status}")
                self.start()
                replaced += 1
        return replaced

    def stop_all(self) -> None:
        for pid in list(self.live):
            self.stop(pid, signal.SIGTERM, "stopped")


def read_log(path: Path) -> list[tuple[str, str, int, float]]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        what, job_id, pid, at = line.split()
        events.append((what, job_id, int(pid), float(at)))
    return events


async def enqueue(url: str, jobs: dict[str, dict[str, Any]]) -> None:
    async with trioqueue.RedisBackend(
        url, queue=QUEUE, capacity=len(jobs) + 1, min_idle=MIN_IDLE
    ) as backend:  # the capacity every worker is given too
        queue = trioqueue.Queue(backend)
        for job_id, payload in jobs.items():
            await queue.enqueue(payload, id=job_id)


async def final_state(url: str) -> tuple[trioqueue.MetricsSnapshot, list[trioqueue.JobRecord]]:
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        return await backend.stats(), await backend.dead_letters()


async def records(url: str, ids: list[str]) -> dict[str, trioqueue.JobRecord | None]:
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        return {job_id: await backend.status(job_id) for job_id in ids}


def orphans_of(pid: int, events: list[tuple[str, str, int, float]]) -> list[str]:
    """Jobs whose handler started on *pid* and did not finish there."""
    started = {job_id for what, job_id, p, _ in events if p == pid and what == "start"}
    return sorted(
        started - {job_id for what, job_id, p, _ in events if p == pid and what == "done"}
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The crash test in a temporary directory of its own, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="trioqueue-chaos-") as folder:
        return run_in(args, Path(folder))


def run_in(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    log = workdir / "executions.log"
    server = RedisServer(find_server_binary(), appendonly=True)
    server.start()
    jobs = {f"c{n}": {"ms": rng.randint(args.min_ms, args.max_ms)} for n in range(args.jobs)}
    fleet = Fleet(server.url, workdir, log, args.concurrency, args.jobs + args.poison + 1)
    poison = {f"poison{n}": {"ms": 0, "poison": True} for n in range(args.poison)}
    everything = dict(jobs)
    for n, (job_id, payload) in enumerate(poison.items()):  # spread through the run
        everything = _insert(everything, (n + 1) * len(jobs) // (len(poison) + 1), job_id, payload)
    faults: list[tuple[str, int, float]] = []  # (kind, pid, time)
    down_start: int | None = None
    started = time.time()
    try:
        trio.run(enqueue, server.url, everything)
        for _ in range(args.workers):
            fleet.start()
        next_kill = time.time() + rng.uniform(0.7, 1.3)
        next_check = 0.0
        sigtermed = restarted = False
        waiting: dict[str, float] = {}  # orphans of a SIGKILL -> when it happened
        recoveries: dict[str, float] = {}  # seconds from the kill until it was put back
        while True:
            now = time.time()
            if now - started > args.deadline:
                raise TimeoutError(f"not finished within --deadline {args.deadline}s")
            fleet.reap()
            done_ids = {e[1] for e in read_log(log) if e[0] == "done"}
            share = len(done_ids) / len(jobs)
            if share >= args.fault_until and now >= next_check:
                next_check = now + 0.5
                if trio.run(final_state, server.url)[0].gauges.held == 0:
                    break  # every job finished: completed or dead-lettered
            if share < args.fault_until:
                targets = sorted(set(fleet.live) - {down_start})  # it must get to work
                running = [p for p in targets if "worker on" in fleet.stderr[p].read_text()]
                if not sigtermed and share >= 0.25 and running:
                    pid = rng.choice(running)  # SIGTERM before Python is up kills at once
                    fleet.stop(pid, signal.SIGTERM, "sigterm")
                    faults.append(("sigterm", pid, time.time()))
                    fleet.start()
                    sigtermed = True
                elif not restarted and share >= 0.45:
                    server.stop()
                    faults.append(("redis-restart", 0, time.time()))
                    down_start = fleet.start()  # a worker that starts while Redis is down
                    noticed = time.time() + 30
                    while "could not be reached" not in fleet.stderr[down_start].read_text():
                        if time.time() > noticed:
                            break  # reported as a miss
                        time.sleep(0.05)
                    time.sleep(OUTAGE)
                    server.start()
                    restarted = True
                elif now >= next_kill and targets:
                    pid = rng.choice(targets)
                    fleet.stop(pid, signal.SIGKILL, "sigkill")
                    killed_at = time.time()
                    faults.append(("sigkill", pid, killed_at))
                    for job_id in orphans_of(pid, read_log(log)):
                        if job_id in jobs:
                            waiting[job_id] = killed_at
                    fleet.start()
                    next_kill = time.time() + rng.uniform(0.7, 1.3)
            if waiting:  # a record touched after the kill was put back by a sweeper
                for job_id, record in trio.run(records, server.url, sorted(waiting)).items():
                    if record is not None and record.updated_at > waiting[job_id]:
                        recoveries[job_id] = record.updated_at - waiting.pop(job_id)
            time.sleep(0.05)
        fleet.stop_all()
        stats, dead = trio.run(final_state, server.url)
        final = trio.run(records, server.url, sorted(jobs))
    finally:
        for process in fleet.live.values():
            process.kill()
            process.wait()
        server.close()
    return analyse(
        args, jobs, poison, read_log(log), fleet, faults, down_start, stats, dead, final, recoveries
    )


def _insert(ordered: dict[str, Any], at: int, key: str, value: dict[str, Any]) -> dict[str, Any]:
    items = list(ordered.items())
    items.insert(at, (key, value))
    return dict(items)


def _kill_times(
    faults: list[tuple[str, int, float]],
    events: list[tuple[str, str, int, float]],
    jobs: dict[str, Any],
) -> dict[str, float]:
    """For each job orphaned by a SIGKILL, when that kill happened (the last one)."""
    when: dict[str, float] = {}
    for kind, pid, at in faults:
        if kind == "sigkill":
            for job_id in orphans_of(pid, events):
                if job_id in jobs:
                    when[job_id] = at
    return when


def analyse(
    args: argparse.Namespace,
    jobs: dict[str, Any],
    poison: dict[str, Any],
    events: list[tuple[str, str, int, float]],
    fleet: Fleet,
    faults: list[tuple[str, int, float]],
    down_start: int | None,
    stats: trioqueue.MetricsSnapshot,
    dead: list[trioqueue.JobRecord],
    final: dict[str, trioqueue.JobRecord | None],
    recovered: dict[str, float],
) -> dict[str, Any]:
    starts: dict[str, list[tuple[int, float]]] = defaultdict(list)
    dones: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for what, job_id, pid, at in events:
        (starts if what == "start" else dones)[job_id].append((pid, at))
    crashed = {pid for pid, how in fleet.ended.items() if how in ("sigkill", "crashed")}
    # completed means its record says so: a "done" whose ack never landed is not enough
    completed = {
        job_id
        for job_id, record in final.items()
        if record is not None and record.state is trioqueue.JobState.COMPLETED
    }
    lost = sorted(set(jobs) - completed)
    never_ran = sorted(job_id for job_id in completed if not dones[job_id])
    duplicated = sorted(job_id for job_id in jobs if len(dones[job_id]) > 1)
    # a duplicate is allowed only after a crash: an earlier run on a worker that crashed
    unexplained = [
        job_id for job_id in duplicated if not any(pid in crashed for pid, _ in starts[job_id][:-1])
    ]
    bound = len(crashed) * (args.concurrency + PREFETCH)
    # a recovery that Redis being down held up says nothing about recovery itself
    outages = [(at, at + OUTAGE + 1.0) for kind, _, at in faults if kind == "redis-restart"]
    kills = dict(_kill_times(faults, events, jobs).items())
    recoveries = [
        seconds
        for job_id, seconds in recovered.items()
        if not any(start < kills[job_id] + MIN_IDLE + 1 and kills[job_id] < end
                   for start, end in outages)
    ]  # fmt: skip

    last_fault = max((at for _, _, at in faults), default=0.0)
    last_done = max((at for runs in dones.values() for _, at in runs), default=0.0)
    dead_ids = {record.id for record in dead}
    poison_ok = dead_ids == set(poison) and all(
        "max_deliveries" in (record.reason or "") for record in dead
    )
    down_text = fleet.stderr[down_start].read_text() if down_start is not None else ""
    down_worked = down_start is not None and any(
        pid == down_start for runs in starts.values() for pid, _ in runs
    )
    report = {
        "jobs": len(jobs),
        "poison": len(poison),
        "workers_started": len(fleet.stderr),
        "sigkills": sum(1 for kind, _, _ in faults if kind == "sigkill"),
        "crashes_by_poison": sum(1 for how in fleet.ended.values() if how == "crashed"),
        "sigterms": sum(1 for kind, _, _ in faults if kind == "sigterm"),
        "redis_restarts": sum(1 for kind, _, _ in faults if kind == "redis-restart"),
        "completed": len(completed),
        "lost": len(lost),
        "recoveries_timed": len(recoveries),
        "duplicated": len(duplicated),
        "duplicate_bound": bound,
        "duplicates_not_after_a_crash": len(unexplained),
        "slowest_recovery_s": round(max(recoveries, default=0.0), 3),
        "recovery_target_s": MIN_IDLE + 1,
        "last_fault_to_last_completion_s": round(last_done - last_fault, 3),
        "poison_dead_lettered": poison_ok,
        "worker_started_while_redis_down": {
            "logged": "could not be reached" in down_text,
            "then_worked": down_worked,
        },
        "succeeded": stats.succeeded,
        "conserved": stats.conserved,
    }
    misses = []
    if lost:
        misses.append(f"lost {len(lost)}: {lost[:10]}")
    if unexplained:
        misses.append(f"duplicates without a crash: {unexplained[:10]}")
    if len(duplicated) > bound:
        misses.append(f"{len(duplicated)} duplicates > bound {bound}")
    if report["slowest_recovery_s"] > MIN_IDLE + 1:
        misses.append(f"slowest recovery {report['slowest_recovery_s']}s > {MIN_IDLE + 1}s")
    if not poison_ok:
        misses.append(f"dead letters {sorted(dead_ids)} are not exactly the poison jobs")
    if not (report["worker_started_while_redis_down"]["logged"] and down_worked):
        misses.append("the worker started while Redis was down did not log it or never worked")
    if never_ran:
        misses.append(f"completed without a logged run: {never_ran[:10]}")
    misses.extend(fleet.surprises)
    tracebacks = [p.name for p in fleet.stderr.values() if "Traceback" in p.read_text()]
    if tracebacks:
        misses.append(f"tracebacks in {tracebacks}")
    if stats.succeeded != len(jobs) or not stats.conserved:
        misses.append(f"succeeded {stats.succeeded} of {len(jobs)}, conserved={stats.conserved}")
    report["misses"] = misses
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--poison", type=int, default=3)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="handlers per worker")
    parser.add_argument("--min-ms", type=int, default=50, help="shortest handler")
    parser.add_argument("--max-ms", type=int, default=250, help="longest handler")
    parser.add_argument("--fault-until", type=float, default=0.8, help="share of jobs done")
    parser.add_argument("--deadline", type=float, default=170.0, help="seconds, in all")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report, indent=2))
    return 1 if report["misses"] else 0


if __name__ == "__main__":
    sys.exit(main())
