"""Crash test: jobs through several ``trioqueue worker`` processes while faults hit them.

    python tests/chaos.py [--jobs 2000] [--backlog 10000] [--workers 3] [--deadline 170] [--keep]

On a private Redis (appendonly, fsync always) it enqueues ``--jobs`` jobs of
random duration plus a few poison jobs (whose handler kills its own process),
then ``--backlog`` short jobs behind them, runs them on ``--workers`` worker
processes, and meanwhile: SIGKILLs a worker that is running jobs about every
second and starts a replacement; SIGTERMs one (the graceful path); restarts
Redis once, starting a worker while it is down; and holds the network line of
one worker (a TCP proxy that stops forwarding, in both directions, for three
leases, while its handlers go on). No kill comes within a recovery target
before the hold or the restart, so that each kill's recovery is timed, nor,
while the line is held, one that would leave no other worker to sweep. Every
execution is logged by the handler (``chaos_handlers.py``). It reports
completed, lost, duplicated, the slowest recovery (from a SIGKILL to the next
start of each job the killed worker was running) with the fewest jobs
queued behind at a kill, and exits 1 when a target is missed:

- lost = 0;
- every duplicate follows a crash (SIGKILL or poison) or the held line (an
  earlier run on the cut-off worker), and there are at most as many as the
  crashed workers could hold (workers x (concurrency + prefetch)) plus what the
  cut-off worker held;
- every job a SIGKILLed worker was running on its first delivery starts again
  within min_idle + one sweep + 0.5 s, with the backlog queued behind it (kills
  whose recovery window overlaps the Redis outage, the held line, or a silence
  of half a lease with no worker alive are not timed; a job killed on a later
  delivery may be a suspect, which runs alone once its pool's other handlers are
  done, and a job may be claimed meanwhile by a worker that a poison job kills
  before it starts the job: the wait of either is reported, not held to the
  target);
- the cut-off worker starts jobs again once its line is released, and its late
  outcomes take nothing twice (every job succeeded once in the counters);
- each poison job is a dead letter, for max_deliveries, and nothing else is;
- the worker started while Redis was down logged that and then did work;
- the queue's counters are conserved, and every job succeeded exactly once.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import signal
import statistics
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
from tcp_line import Line  # noqa: E402

MIN_IDLE = 1.0
SWEEP = 0.25
PREFETCH = 0
MAX_ATTEMPTS = 3
MAX_DELIVERIES = 6  # above max_attempts, and the claims a SIGKILL storm wastes
QUEUE = "{chaos}"
POISON_EXIT = 13  # the status a poison job's os._exit gives (chaos_handlers.py)
OUTAGE = 1.0  # seconds Redis stays down in its restart
HOLD = 3 * MIN_IDLE  # seconds the cut-off worker's line forwards nothing
RECOVERY_TARGET = MIN_IDLE + SWEEP + 0.5  # from a SIGKILL to the next start


class Fleet:
    """The worker processes: started, killed, replaced; how each one ended."""

    explained_exit: int | None = POISON_EXIT  # a worker that exits so by itself: no surprise

    def __init__(self, url: str, workdir: Path, log: Path, concurrency: int, capacity: int) -> None:
        self.url, self.workdir, self.log, self.concurrency = url, workdir, log, concurrency
        self.capacity = capacity  # as the producer's: every user of a queue must agree
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.ended: dict[int, str] = {}  # pid -> sigkill, sigterm, crashed, stopped
        self.surprises: list[str] = []  # a worker that ended in a way no fault explains
        self.ended_at: dict[int, float] = {}
        self.stderr: dict[int, Path] = {}
        self.urls: dict[int, str] = {}  # the n-th worker started reaches Redis here instead
        self.line_url: str | None = None  # one worker at a time reaches Redis through this
        self.on_line: list[int] = []  # the workers started through it, in order

    def command(self, n: int) -> list[str]:
        """The command line of the *n*-th worker started."""
        return [
            sys.executable, "-m", "trioqueue", "worker", "chaos_handlers:run",
            "--redis", self.urls.get(n, self.url), "--queue", QUEUE,
            "--capacity", str(self.capacity),
            "--workers", str(self.concurrency), "--prefetch", str(PREFETCH),
            "--min-idle", str(MIN_IDLE), "--sweep-interval", str(SWEEP),
            "--max-attempts", str(MAX_ATTEMPTS), "--max-deliveries", str(MAX_DELIVERIES),
            "--grace", "10",
        ]  # fmt: skip

    def start(self) -> int:
        n = len(self.stderr)
        err = self.workdir / f"worker-{n}.err"
        through_line = self.line_url is not None and self.line_pid() is None
        if through_line:  # the first worker, or the replacement of one that crashed
            self.urls[n] = self.line_url
        command = self.command(n)
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
        if through_line:
            self.on_line.append(process.pid)
        return process.pid

    def line_pid(self) -> int | None:
        """The live worker that reaches Redis through `line_url`, if any."""
        return next((pid for pid in self.on_line if pid in self.live), None)

    def stop(self, pid: int, signum: int, how: str) -> None:
        process = self.live.pop(pid)
        process.send_signal(signum)
        status = process.wait(timeout=60)
        if signum == signal.SIGTERM and status == self.explained_exit:
            how = "crashed"  # a poison job in the grace period
        self.ended[pid], self.ended_at[pid] = how, time.time()
        if signum == signal.SIGTERM and status not in (0, 3, self.explained_exit):
            # neither clean nor with handlers cancelled
            self.surprises.append(f"worker {pid} exited {status} after SIGTERM")

    def reap(self) -> int:
        """Note workers that died by themselves (a poison job, say) and replace them."""
        replaced = 0
        for pid, process in list(self.live.items()):
            status = process.poll()
            if status is not None:
                del self.live[pid]
                self.ended[pid], self.ended_at[pid] = "crashed", time.time()
                if status != self.explained_exit:  # not a poison job: a bug
                    self.surprises.append(f"worker {pid} died by itself with status {status}")
                self.start()
                replaced += 1
        return replaced

    def stop_all(self) -> None:
        for pid in list(self.live):
            self.stop(pid, signal.SIGTERM, "stopped")


Event = tuple[str, str, int, float]  # start or done, job id, pid, wall time


def _parse(lines: list[str]) -> list[Event]:
    events = []
    for line in lines:
        what, job_id, pid, at = line.split()
        events.append((what, job_id, int(pid), float(at)))
    return events


def read_log(path: Path) -> list[Event]:
    """Every execution logged so far."""
    return _parse(path.read_text().splitlines()) if path.exists() else []


class LogTail:
    """The execution log, read as it grows: each `update` parses only the new lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[Event] = []
        self.done: set[str] = set()
        self._offset = 0

    def update(self) -> list[Event]:
        if not self.path.exists():
            return self.events
        with self.path.open("rb") as file:
            file.seek(self._offset)
            chunk = file.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
        self._offset += len(whole)
        new = _parse(whole.decode().splitlines())
        self.events.extend(new)
        self.done.update(job_id for what, job_id, _, _ in new if what == "done")
        return self.events


async def enqueue(url: str, jobs: dict[str, dict[str, Any]]) -> None:
    async with trioqueue.RedisBackend(
        url, queue=QUEUE, capacity=len(jobs) + 1, min_idle=MIN_IDLE
    ) as backend:  # the capacity every worker is given too
        queue = trioqueue.Queue(backend)
        for job_id, payload in jobs.items():
            await queue.enqueue(payload, id=job_id)


async def queued(url: str) -> int:
    """Jobs waiting in the ready queue."""
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        return (await backend.stats()).gauges.queue_depth


async def final_state(url: str) -> tuple[trioqueue.MetricsSnapshot, list[trioqueue.JobRecord]]:
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        return await backend.stats(), await backend.dead_letters()


async def records(
    url: str, ids: list[str], queue: str = QUEUE
) -> dict[str, trioqueue.JobRecord | None]:
    """The record of each of *ids* (None when there is none)."""
    async with trioqueue.RedisBackend(url, queue=queue, min_idle=MIN_IDLE) as backend:
        return {job_id: await backend.status(job_id) for job_id in ids}


async def held(url: str, queue: str = QUEUE) -> int:
    """Jobs the queue holds unfinished: ready, stored, claimed or waiting to retry."""
    async with trioqueue.RedisBackend(url, queue=queue, min_idle=MIN_IDLE) as backend:
        return (await backend.stats()).gauges.held


def orphans_of(pid: int, events: list[tuple[str, str, int, float]]) -> list[str]:
    """Jobs whose handler started on *pid* and did not finish there."""
    started = {job_id for what, job_id, p, _ in events if p == pid and what == "start"}
    return sorted(
        started - {job_id for what, job_id, p, _ in events if p == pid and what == "done"}
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The crash test in a temporary directory of its own.

    The directory (the execution log, each worker's stderr) is removed afterwards,
    unless a target was missed or ``--keep`` was given: then the report names it.
    """
    folder = Path(tempfile.mkdtemp(prefix="trioqueue-chaos-"))
    report: dict[str, Any] | None = None
    try:
        report = run_in(args, folder)
    finally:
        if report is None or report["misses"] or args.keep:
            print(f"chaos: logs kept in {folder}", file=sys.stderr)
            if report is not None:
                report["logs"] = str(folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return report


def run_in(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    log = workdir / "executions.log"
    server = RedisServer(find_server_binary(), appendonly=True)
    server.start()
    line = Line(server.port)  # the first worker's way to Redis: its line is held once
    jobs = {f"c{n}": {"ms": rng.randint(args.min_ms, args.max_ms)} for n in range(args.jobs)}
    backlog = {f"b{n}": {"ms": rng.randint(1, 5)} for n in range(args.backlog)}
    poison = {f"poison{n}": {"ms": 0, "poison": True} for n in range(args.poison)}
    everything = dict(jobs)
    for n, (job_id, payload) in enumerate(poison.items()):  # spread through the run
        everything = _insert(everything, (n + 1) * len(jobs) // (len(poison) + 1), job_id, payload)
    everything |= backlog  # behind every other job: a recovered job must not wait for it
    fleet = Fleet(server.url, workdir, log, args.concurrency, len(everything) + 1)
    fleet.line_url = line.url
    tail = LogTail(log)
    faults: list[tuple[str, int, float]] = []  # (kind, pid, time)
    behind: list[int] = []  # jobs queued at each SIGKILL
    final: dict[str, trioqueue.JobRecord | None] = {}  # each job's record once completed
    down_start: int | None = None
    started = time.time()
    try:
        trio.run(enqueue, server.url, everything)
        for _ in range(args.workers):
            fleet.start()  # the first through the line
        next_kill = time.time() + rng.uniform(0.7, 1.3)
        next_check = 0.0
        sigtermed = restarted = False
        held_until: float | None = None  # while the line is held: when it is released
        last_kill = -math.inf

        def running_jobs(pids: list[int]) -> list[int]:
            """The workers of *pids* running a job of *jobs* (not the backlog) now."""
            return [p for p in pids if not jobs.keys().isdisjoint(orphans_of(p, tail.events))]

        def still_running(pid: int, margin: float) -> list[str]:
            """The jobs of *jobs* that *pid* runs now and will for *margin* seconds more.

            Each job's duration is known (its payload), so a hold made now is sure to
            catch them running, however stale the log read was.
            """
            tail.update()
            begun = {j: at for what, j, p, at in tail.events if p == pid and what == "start"}
            mine = [j for j in orphans_of(pid, tail.events) if j in jobs]
            return [j for j in mine if begun[j] + jobs[j]["ms"] / 1000 > time.time() + margin]

        while True:
            now = time.time()
            if now - started > args.deadline:
                raise TimeoutError(f"not finished within --deadline {args.deadline}s")
            fleet.reap()
            tail.update()
            share = len(tail.done & jobs.keys()) / len(jobs)
            pending = sorted(tail.done & jobs.keys() - final.keys())
            if pending:
                # the records of the jobs the faults hit, read as they finish: the
                # backlog's records (10,000 by default) push them out of the retention
                for job_id, record in trio.run(records, server.url, pending).items():
                    if record is not None and record.state is trioqueue.JobState.COMPLETED:
                        final[job_id] = record
            cut_off = fleet.line_pid()
            if held_until is not None and now >= held_until:
                line.release()
                faults.append(("line-released", cut_off or 0, time.time()))
                held_until = math.inf  # once
            if share >= args.fault_until and now >= next_check and held_until is not None:
                next_check = now + 0.5
                if trio.run(final_state, server.url)[0].gauges.held == 0:
                    break  # every job finished: completed or dead-lettered
            if share < args.fault_until:
                # the cut-off worker and the one started during the outage must get to work
                targets = sorted(set(fleet.live) - {down_start, cut_off})
                running = [p for p in targets if "worker on" in fleet.stderr[p].read_text()]
                # the hold and the restart wait until the last kill's recovery is timed,
                # and kills wait meanwhile; while the line is held, a worker besides the
                # victim must be left to recover the cut-off worker's claims
                clear = now >= last_kill + RECOVERY_TARGET
                if held_until is None and share >= 0.05:  # before most kills
                    # held only while the cut-off worker has a job that outlasts the
                    # hold's start, and another worker is up to recover it
                    if clear and cut_off is not None and running and still_running(cut_off, 0.05):
                        line.hold()
                        faults.append(("line-held", cut_off, time.time()))
                        held_until = time.time() + HOLD
                elif held_until not in (None, math.inf) and len(targets) < 2:
                    pass  # held, and no other worker to sweep
                elif not sigtermed and share >= 0.25 and running:
                    pid = rng.choice(running)  # SIGTERM before Python is up kills at once
                    fleet.stop(pid, signal.SIGTERM, "sigterm")
                    faults.append(("sigterm", pid, time.time()))
                    fleet.start()
                    sigtermed = True
                elif not restarted and share >= 0.2 and not clear:
                    pass  # the restart is due: no kill before it
                elif not restarted and share >= 0.2:
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
                    faults.append(("redis-back", 0, time.time()))
                    restarted = True
                    next_kill = time.time() + 1.0  # a kill sooner is not timed
                elif now >= next_kill and (busy := running_jobs(targets)):
                    pid = rng.choice(busy)  # a kill that orphans jobs, so its recovery is timed
                    fleet.stop(pid, signal.SIGKILL, "sigkill")
                    last_kill = time.time()
                    faults.append(("sigkill", pid, last_kill))
                    if server.ping():  # not during the restart
                        behind.append(trio.run(queued, server.url))
                    fleet.start()
                    next_kill = time.time() + rng.uniform(0.7, 1.3)
            time.sleep(0.05)
        fleet.stop_all()
        stats, dead = trio.run(final_state, server.url)
        final |= trio.run(records, server.url, sorted(jobs.keys() - final.keys()))
    finally:
        for process in fleet.live.values():
            process.kill()
            process.wait()
        line.close()
        server.close()
    return analyse(
        args, jobs, poison, read_log(log), fleet, faults, down_start, stats, dead, final, behind
    )


def _insert(ordered: dict[str, Any], at: int, key: str, value: dict[str, Any]) -> dict[str, Any]:
    items = list(ordered.items())
    items.insert(at, (key, value))
    return dict(items)


def _recoveries(
    faults: list[tuple[str, int, float]],
    events: list[Event],
    jobs: dict[str, Any],
    poison: dict[str, Any],
) -> tuple[dict[str, float], dict[str, float]]:
    """For each job a SIGKILLed worker was running: seconds from the kill to its next start.

    Returned in two parts: jobs on their first delivery, and the others. A job
    that had run before may be a suspect (its deliveries died twice: it runs
    alone, once its pool's other handlers are done), and a job may have been
    claimed by a worker that a poison job killed (it dies before it starts the
    rest of what it claimed, so no start is logged for that claim and the job
    waits out a lease again) when a poison job started between the job's return
    to the ready list and its next start: the wait of either is reported, not
    held to the target. Kills whose recovery window overlaps the Redis outage, the
    held line or a silence are left out: Redis being down holds up recovery, and
    so does the cut-off worker, whose sweeper is stuck (with two workers, none
    other is left to sweep), and a silence gives each claim one more lease; none
    says anything about recovery itself.
    """

    def windows(begin: str, end: str, slack: float) -> list[tuple[float, float]]:
        begins = [at for kind, _, at in faults if kind == begin]
        ends = [at + slack for kind, _, at in faults if kind == end]
        return list(zip(begins, ends, strict=False))

    # a restarted Redis takes a moment to load its data
    outages = windows("redis-restart", "redis-back", 1.0)
    outages += windows("line-held", "line-released", 0.0)
    # a silence: no worker alive to run the backlog for half a lease (kills and poison
    # jobs took them all, and their replacements were starting); the sweeper gives
    # every expired claim one more lease after it (see lua/sweep.lua)
    times = sorted(at for *_, at in events)
    outages += [(a, b + MIN_IDLE) for a, b in itertools.pairwise(times) if b - a > MIN_IDLE / 2]
    starts: dict[str, list[float]] = defaultdict(list)
    for what, job_id, _, at in events:
        if what == "start":
            starts[job_id].append(at)
    poisoned = [at for job_id in poison for at in starts[job_id]]  # each killed its worker
    first: dict[str, float] = {}
    again: dict[str, float] = {}
    for kind, pid, killed in faults:
        if kind != "sigkill" or any(
            start < killed + RECOVERY_TARGET and killed < end for start, end in outages
        ):
            continue
        for job_id in orphans_of(pid, events):
            if job_id in jobs:
                later = [at for at in starts[job_id] if at > killed]
                earlier = len(starts[job_id]) - len(later)
                waited = later[0] - killed if later else math.inf
                # back on the ready list a lease after its claim (just before its start)
                ready = starts[job_id][earlier - 1] + MIN_IDLE - 0.1
                poisoned_claim = any(ready <= at < killed + waited for at in poisoned)
                (first if earlier == 1 and not poisoned_claim else again)[job_id] = waited
    return first, again


def analyse(
    args: argparse.Namespace,
    jobs: dict[str, Any],
    poison: dict[str, Any],
    events: list[Event],
    fleet: Fleet,
    faults: list[tuple[str, int, float]],
    down_start: int | None,
    stats: trioqueue.MetricsSnapshot,
    dead: list[trioqueue.JobRecord],
    final: dict[str, trioqueue.JobRecord | None],
    behind: list[int],
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
    # the backlog's records are too many to outlive the retention: each must have run,
    # and the counters say each succeeded once
    backlog = {f"b{n}" for n in range(args.backlog)}
    backlog_not_run = sorted(job_id for job_id in backlog if not dones[job_id])
    everything = set(jobs) | backlog
    duplicated = sorted(job_id for job_id in everything if len(dones[job_id]) > 1)

    # the held line: the cut-off worker's runs that began before it was released may
    # have outlived their leases; each may run again elsewhere
    # (a poison job may kill the worker on the line; its replacement takes the line)
    held = [at for kind, _, at in faults if kind == "line-held"]
    released = [at for kind, _, at in faults if kind == "line-released"]
    held_at = held[0] if held else math.inf
    released_at = released[0] if released else math.inf
    on_line = set(fleet.on_line)

    def cut_short(pid: int, at: float) -> bool:
        return pid in on_line and at < released_at

    # a duplicate is allowed only after a crash or on the cut-off worker: an earlier run
    # on a worker that crashed, or on the cut-off one while its line was held
    unexplained = [
        job_id
        for job_id in duplicated
        if not any(pid in crashed or cut_short(pid, at) for pid, at in starts[job_id][:-1])
    ]
    cut_twice = sorted(
        job_id
        for job_id in duplicated
        if any(cut_short(pid, at) for pid, at in starts[job_id][:-1])
    )
    late = sorted(  # outcomes the cut-off worker reached while its line was held
        job_id
        for job_id, runs in dones.items()
        if any(pid in on_line and held_at <= at < released_at for pid, at in runs)
    )
    caught = {  # jobs the cut-off worker was running when its line was held
        job_id
        for job_id in jobs
        for pid, at in starts[job_id]
        if pid in on_line
        and at < held_at
        and not any(p == pid and held_at > end for p, end in dones[job_id])
    }
    after_release = sum(
        1 for runs in starts.values() for pid, at in runs if pid in on_line and at > released_at
    )
    bound = len(crashed) * (args.concurrency + PREFETCH) + args.concurrency + PREFETCH
    recoveries, redeliveries = _recoveries(faults, events, jobs, poison)
    slowest = max(recoveries.values(), default=0.0)

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
        "backlog": args.backlog,
        "poison": len(poison),
        "workers_started": len(fleet.stderr),
        "sigkills": sum(1 for kind, _, _ in faults if kind == "sigkill"),
        "crashes_by_poison": sum(1 for how in fleet.ended.values() if how == "crashed"),
        "sigterms": sum(1 for kind, _, _ in faults if kind == "sigterm"),
        "redis_restarts": sum(1 for kind, _, _ in faults if kind == "redis-restart"),
        "line_held_s": round(released_at - held_at, 3) if held else 0.0,
        "completed": len(completed),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "duplicate_bound": bound,
        "duplicates_not_after_a_crash": len(unexplained),
        "running_when_held": len(caught),
        "run_twice_after_the_held_line": len(cut_twice),
        "outcomes_reached_while_held": len(late),
        "cut_off_starts_after_release": after_release,
        "recoveries_timed": len(recoveries),
        "fewest_queued_behind_at_a_kill": min(behind, default=0),
        "slowest_recovery_s": round(slowest, 3),
        "median_recovery_s": round(statistics.median(recoveries.values() or [0.0]), 3),
        "recoveries_over_target": {
            job_id: round(seconds, 3)
            for job_id, seconds in recoveries.items()
            if seconds > RECOVERY_TARGET
        },
        "recovery_target_s": RECOVERY_TARGET,
        # jobs killed on a later delivery, or whose wait saw a poison job: not held to it
        "later_deliveries_timed": len(redeliveries),
        "slowest_later_delivery_recovery_s": round(max(redeliveries.values(), default=0.0), 3),
        "last_fault_to_last_completion_s": round(last_done - last_fault, 3),
        "poison_dead_lettered": poison_ok,
        "worker_started_while_redis_down": {
            "logged": "could not be reached" in down_text,
            "then_worked": down_worked,
        },
        "succeeded": stats.succeeded,
        "conserved": stats.conserved,
        # every fault, in seconds from the first execution
        "faults": [[kind, round(at - min(at for *_, at in events), 2)] for kind, _, at in faults],
    }
    misses = []
    if lost:
        misses.append(f"lost {len(lost)}: {lost[:10]}")
    if backlog_not_run:
        misses.append(f"backlog jobs never run: {backlog_not_run[:10]}")
    if unexplained:
        misses.append(f"duplicates without a crash: {unexplained[:10]}")
    if len(duplicated) > bound:
        misses.append(f"{len(duplicated)} duplicates > bound {bound}")
    if slowest > RECOVERY_TARGET:
        misses.append(f"slowest recovery {round(slowest, 3)}s > {RECOVERY_TARGET}s")
    if not recoveries:
        misses.append("no recovery after a SIGKILL was timed")
    if not poison_ok:
        misses.append(f"dead letters {sorted(dead_ids)} are not exactly the poison jobs")
    if not (report["worker_started_while_redis_down"]["logged"] and down_worked):
        misses.append("the worker started while Redis was down did not log it or never worked")
    if not held or not released:
        misses.append("the cut-off worker's line was never held and released")
    elif not after_release:
        misses.append("the cut-off worker started no job after its line was released")
    elif not caught:
        misses.append("the held line caught no job running on the cut-off worker")
    elif not_again := sorted(caught - set(cut_twice)):
        # three leases of silence: each must have been recovered and run elsewhere
        misses.append(f"running on the held line, never run again: {not_again[:10]}")
    if never_ran:
        misses.append(f"completed without a logged run: {never_ran[:10]}")
    misses.extend(fleet.surprises)
    tracebacks = [p.name for p in fleet.stderr.values() if "Traceback" in p.read_text()]
    if tracebacks:
        misses.append(f"tracebacks in {tracebacks}")
    if stats.succeeded != len(everything) or not stats.conserved:
        misses.append(
            f"succeeded {stats.succeeded} of {len(everything)}, conserved={stats.conserved}"
        )
    report["misses"] = misses
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--backlog", type=int, default=10_000, help="short jobs behind the rest")
    parser.add_argument("--poison", type=int, default=3)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="handlers per worker")
    parser.add_argument("--min-ms", type=int, default=50, help="shortest handler")
    parser.add_argument("--max-ms", type=int, default=250, help="longest handler")
    parser.add_argument("--fault-until", type=float, default=0.8, help="share of jobs done")
    parser.add_argument("--deadline", type=float, default=170.0, help="seconds, in all")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the logs even when all is well")
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report, indent=2))
    return 1 if report["misses"] else 0


if __name__ == "__main__":
    sys.exit(main())
