"""Crash test of the at-most-once mode: a simple Redis queue under SIGKILLs and a SIGSTOP.

    python tests/chaos_simple.py [--jobs 2000] [--workers 3] [--deadline 90] [--seed N]
                                 [--keep DIR]

On a private Redis (appendonly, fsync always) it enqueues ``--jobs`` jobs of
random duration (50 to 250 ms) on a simple queue (``RedisBackend(reliable=False)``),
runs them on ``--workers`` ``trioqueue worker --simple`` processes (8 handlers
each, prefetch 0, min_idle 1 s, sweeps every 0.25 s, one attempt per job), and
meanwhile:

- SIGKILLs a random worker (ready or still starting, as ``chaos.py`` does) about
  every second and starts a replacement, until ``--fault-until`` of the jobs are
  done;
- once, when a third of the jobs are done, SIGSTOPs the ready worker with the
  most handlers mid-job (a ``start`` and no ``done`` in the log), while another
  is ready to sweep, for 3 min_idle, then SIGCONTs it. Its leases lapse
  meanwhile, and another worker's sweeper dead-letters its jobs; when it resumes,
  its handlers finish, log ``done`` and report successes that must be refused.
  It is never SIGKILLed afterwards, and no SIGKILL comes while it is stopped
  (the other workers must be there to sweep).

Every execution is logged by the handler (``chaos_handlers.py``). Once the queue
holds nothing unfinished, the rest are SIGTERMed and every record, the counters
and the dead letters are read. It prints a JSON report and exits 1 when a check
is missed:

- no job started twice (at most one ``start`` line per job): the at-most-once
  promise;
- none lost: every job's record is completed or a dead letter (and the dead
  letters list holds exactly the failed records); none completed without a
  logged ``done``;
- every job whose handler started on a SIGKILLed worker and did not log ``done``
  there is a dead letter whose reason says its worker stopped while holding it
  (``sweep.lua``); no dead letter has another reason;
- every dead letter is explained by a fault: its one run started on a SIGKILLed
  worker, or on the SIGSTOPped one before the stop; if that run logged ``done``,
  then after the SIGCONT (a late outcome) or at most 2 min_idle before the fault
  (its outcome was still on the way). A dead letter whose job never started was
  claimed by a faulted worker in the instant before its handler began; the log
  cannot tell which worker claimed it, so these are bounded, and counted: a
  worker holds at most handlers + prefetch claims (8; a claim keeps its place
  until its outcome lands), so the dead letters, started or not, number at most
  8 per fault;
- the SIGSTOP caught at least one running handler whose lease lapsed (its job
  was dead-lettered before the SIGCONT), and at least one of them logged ``done``
  after the SIGCONT; each such job is still a dead letter at the end (its late
  success was refused, not turned into a completion), and the queue counted at
  least as many refused (stale) outcomes; the stopped worker logged nothing
  while stopped (else the stop did not hold and proves nothing);
- the queue's counters are conserved, ``succeeded`` equals the completed
  records and ``dead_lettered`` the dead letters; no worker ended in a way no
  fault explains; no traceback in any worker's stderr;
- the run ends within ``--deadline`` seconds, or fails.

The temporary directory (worker logs, the execution log) is removed afterwards,
unless ``--keep DIR`` names a new one to run in; the Redis data goes either way.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

import trioqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from chaos import Fleet, held, orphans_of, read_log, records  # noqa: E402
from redis_server import RedisServer, find_server_binary  # noqa: E402

MIN_IDLE = 1.0
SWEEP = 0.25
PREFETCH = 0
QUEUE = "{simple}"
STOP_AT = 1 / 3  # share of the jobs done when the SIGSTOP comes
STOP_LEASES = 3  # the SIGSTOP lasts this many min_idle
IN_FLIGHT = 2 * MIN_IDLE  # a "done" this long before a fault may not have reached Redis
ABANDONED = "stopped while holding it"  # sweep.lua's dead-letter reason, loosely

Event = tuple[str, str, int, float]  # what, job id, pid, wall time


class SimpleFleet(Fleet):
    """`chaos.Fleet` whose workers run the queue in simple mode, one attempt per job.

    No poison jobs here: a worker that ends by itself is a surprise, whatever its status.
    """

    explained_exit = None

    def command(self, n: int) -> list[str]:
        """The command line of the *n*-th worker started: ``--simple``."""
        return [
            sys.executable, "-m", "trioqueue", "worker", "chaos_handlers:run",
            "--redis", self.url, "--queue", QUEUE, "--capacity", str(self.capacity),
            "--simple", "--workers", str(self.concurrency), "--prefetch", str(PREFETCH),
            "--min-idle", str(MIN_IDLE), "--sweep-interval", str(SWEEP),
            "--max-attempts", "1", "--grace", "10",
        ]  # fmt: skip


@dataclass
class Stop:
    """The SIGSTOP: whom, when, and the handlers it caught mid-job."""

    pid: int
    at: float
    caught: list[str]  # jobs whose handler had started there and not logged done
    cont_at: float | None = None
    dead_before_cont: set[str] = field(default_factory=set)  # read just before the SIGCONT


async def enqueue(url: str, jobs: dict[str, dict[str, Any]]) -> None:
    async with trioqueue.RedisBackend(
        url, queue=QUEUE, capacity=len(jobs) + 1, min_idle=MIN_IDLE, reliable=False
    ) as backend:  # the first writer makes the queue simple; the workers say --simple too
        queue = trioqueue.Queue(backend)
        for job_id, payload in jobs.items():
            await queue.enqueue(payload, id=job_id)


async def final_state(
    url: str, ids: list[str]
) -> tuple[
    trioqueue.MetricsSnapshot, list[trioqueue.JobRecord], dict[str, trioqueue.JobRecord | None]
]:
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        stats, dead = await backend.stats(), await backend.dead_letters()
        return stats, dead, {job_id: await backend.status(job_id) for job_id in ids}


def is_dead(record: trioqueue.JobRecord | None) -> bool:
    return record is not None and record.state is trioqueue.JobState.FAILED


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The crash test in a temporary directory of its own, removed afterwards (or in --keep)."""
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
        return run_in(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="trioqueue-chaos-simple-") as folder:
        return run_in(args, Path(folder))


def stop_one(fleet: Fleet, log: Path) -> Stop | None:
    """SIGSTOP the ready worker with the most handlers mid-job; None if none has one.

    Only while another worker is ready too: one must be there to sweep.
    """
    events = read_log(log)
    ready = [p for p in fleet.live if "worker on" in fleet.stderr[p].read_text()]
    busy = [(len(orphans_of(p, events)), p) for p in ready]
    if len(busy) < 2 or max(busy)[0] == 0:
        return None
    pid = max(busy)[1]
    fleet.live[pid].send_signal(signal.SIGSTOP)
    time.sleep(0.05)  # stopped for sure: it logs nothing more until the SIGCONT
    at = time.time()
    caught = orphans_of(pid, read_log(log))
    if not caught:  # its handlers all ended in the meantime: try again later
        fleet.live[pid].send_signal(signal.SIGCONT)
        return None
    return Stop(pid, at, caught)


def run_in(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    log = workdir / "executions.log"
    server = RedisServer(find_server_binary(), appendonly=True)
    server.start()
    jobs = {f"s{n}": {"ms": rng.randint(args.min_ms, args.max_ms)} for n in range(args.jobs)}
    fleet = SimpleFleet(server.url, workdir, log, args.concurrency, args.jobs + 1)
    faults: list[tuple[str, int, float]] = []  # (kind, pid, time)
    stop: Stop | None = None
    started = time.time()
    try:
        trio.run(enqueue, server.url, jobs)
        for _ in range(args.workers):
            fleet.start()
        next_kill = time.time() + rng.uniform(0.7, 1.3)
        next_check = 0.0
        while True:
            now = time.time()
            if now - started > args.deadline:
                why = "" if stop else " (the SIGSTOP never found a worker mid-job)"
                raise TimeoutError(f"not finished within --deadline {args.deadline}s{why}")
            fleet.reap()
            share = len({e[1] for e in read_log(log) if e[0] == "done"}) / len(jobs)
            if stop is not None and stop.cont_at is None:
                if now >= stop.at + STOP_LEASES * MIN_IDLE:
                    before = trio.run(records, server.url, stop.caught, QUEUE)
                    stop.dead_before_cont = {i for i, record in before.items() if is_dead(record)}
                    stop.cont_at = time.time()  # before: its handlers may log at once
                    fleet.live[stop.pid].send_signal(signal.SIGCONT)
                    next_kill = stop.cont_at + rng.uniform(0.7, 1.3)
            elif stop is None and share >= STOP_AT:
                stop = stop_one(fleet, log)
                if stop is not None:
                    faults.append(("sigstop", stop.pid, stop.at))
            elif share < args.fault_until and now >= next_kill:
                targets = sorted(set(fleet.live) - {stop.pid if stop else 0})
                if targets:
                    pid = rng.choice(targets)
                    fleet.stop(pid, signal.SIGKILL, "sigkill")
                    faults.append(("sigkill", pid, time.time()))
                    fleet.start()
                next_kill = time.time() + rng.uniform(0.7, 1.3)
            if stop is not None and stop.cont_at is not None and now >= next_check:
                next_check = now + 0.5
                if trio.run(held, server.url, QUEUE) == 0:
                    break  # every job finished: completed or dead-lettered
            time.sleep(0.05)
        fleet.stop_all()
        stats, dead, final = trio.run(final_state, server.url, sorted(jobs))
    finally:
        for process in fleet.live.values():
            process.kill()  # a stopped one too
            process.wait()
        server.close()
    assert stop is not None
    report = analyse(args, jobs, read_log(log), fleet, faults, stop, stats, dead, final, started)
    report["seconds"] = round(time.time() - started, 1)
    return report


def analyse(
    args: argparse.Namespace,
    jobs: dict[str, Any],
    events: list[Event],
    fleet: Fleet,
    faults: list[tuple[str, int, float]],
    stop: Stop,
    stats: trioqueue.MetricsSnapshot,
    dead: list[trioqueue.JobRecord],
    final: dict[str, trioqueue.JobRecord | None],
    zero: float,
) -> dict[str, Any]:
    assert stop.cont_at is not None
    cont_at = stop.cont_at
    starts: dict[str, list[tuple[int, float]]] = defaultdict(list)
    dones: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for what, job_id, pid, at in events:
        (starts if what == "start" else dones)[job_id].append((pid, at))
    killed_at = {pid: at for kind, pid, at in faults if kind == "sigkill"}
    completed = {
        job_id
        for job_id, record in final.items()
        if record is not None and record.state is trioqueue.JobState.COMPLETED
    }
    # the dead letters' records (a dead letter's record is never None)
    failed = {job_id: r for job_id, r in final.items() if r is not None and is_dead(r)}
    dead_ids = {record.id for record in dead}
    misses: list[str] = []

    # at most once: one start per job, whatever happened to its worker
    twice = sorted(job_id for job_id in jobs if len(starts[job_id]) > 1)
    if twice:
        misses.append(f"started twice: {twice[:10]}")
    lost = sorted(set(jobs) - completed - set(failed))
    if lost:
        misses.append(f"lost {len(lost)} (neither completed nor dead): {lost[:10]}")
    if dead_ids != set(failed):
        misses.append(
            f"jobs {sorted(dead_ids ^ set(failed))[:10]} are in the dead letters list or "
            "failed, not both"
        )
    never_ran = sorted(job_id for job_id in completed if not dones[job_id])
    if never_ran:
        misses.append(f"completed without a logged run: {never_ran[:10]}")
    reasons = sorted(j for j, record in failed.items() if ABANDONED not in (record.reason or ""))
    if reasons:
        misses.append(f"dead letters with another reason: {reasons[:10]}")

    # a SIGKILLed worker's unfinished jobs: each a dead letter, never run again
    kill_orphans = {j: at for pid, at in killed_at.items() for j in orphans_of(pid, events)}
    not_dead = sorted(job_id for job_id in kill_orphans if job_id not in failed)
    if not_dead:
        misses.append(f"jobs a SIGKILL interrupted that are not dead letters: {not_dead[:10]}")
    slowest_kill = max(
        (failed[j].updated_at - at for j, at in kill_orphans.items() if j in failed), default=0.0
    )

    def late_outcome(pid: int, at: float) -> bool:
        """A ``done`` the SIGSTOPped worker logged after its SIGCONT."""
        return pid == stop.pid and at >= cont_at

    def explained(job_id: str) -> bool:
        """Its one run started on a faulted worker before the fault; any done came late,
        or so shortly before the fault that its outcome may not have reached Redis."""
        pid, began = starts[job_id][0]
        if pid in killed_at:
            fault_at = killed_at[pid]
        elif pid == stop.pid and began < stop.at:
            fault_at = stop.at
        else:
            return False
        return all(
            late_outcome(p, at) or (p == pid and fault_at - IN_FLIGHT <= at <= fault_at)
            for p, at in dones[job_id]
        )

    never_started = sorted(job_id for job_id in failed if not starts[job_id])
    unexplained = sorted(j for j in failed if starts[j] and not explained(j))
    if unexplained:
        misses.append(f"dead letters no fault explains: {unexplained[:10]}")
    # a worker holds at most handlers + prefetch claims (a claim keeps its place until its
    # outcome lands): the faulted workers held no more, started or not
    bound = (args.concurrency + PREFETCH) * len(faults)
    if len(failed) > bound:
        misses.append(
            f"{len(failed)} dead letters > {bound}, what the faulted workers could hold "
            f"({len(never_started)} never started)"
        )
    # its handler logged done before the fault, but the outcome had not landed yet
    done_before_fault = sorted(
        j for j in failed if any(not late_outcome(p, at) for p, at in dones[j])
    )

    # the SIGSTOP: its running handlers' leases lapsed; their late successes refused
    lapsed = sorted(
        job_id
        for job_id in stop.caught
        if job_id in stop.dead_before_cont
        or (job_id in failed and failed[job_id].updated_at < cont_at)
    )
    late = sorted(j for j in lapsed if any(late_outcome(p, at) for p, at in dones[j]))
    accepted = sorted(job_id for job_id in lapsed if job_id not in failed)
    if not lapsed:
        misses.append(
            f"the SIGSTOP caught {len(stop.caught)} running handlers but none of their jobs "
            "was dead-lettered before the SIGCONT: the test proved nothing"
        )
    if lapsed and not late:
        misses.append("no lapsed job's handler logged done after the SIGCONT: nothing was refused")
    if accepted:
        misses.append(f"late outcomes of dead-lettered jobs were accepted: {accepted}")
    if stats.stale < len(late):
        misses.append(f"stale outcomes counted {stats.stale} < {len(late)} late outcomes")
    while_stopped = [e for e in events if e[2] == stop.pid and stop.at < e[3] < cont_at]
    if while_stopped:
        misses.append(f"the SIGSTOPped worker logged {len(while_stopped)} lines while stopped")
    stop_dead = sorted(j for j in failed if starts[j] and starts[j][0][0] == stop.pid)
    refused = [failed[j].updated_at - stop.at for j in lapsed if j in failed]

    misses.extend(fleet.surprises)
    tracebacks = [p.name for p in fleet.stderr.values() if "Traceback" in p.read_text()]
    if tracebacks:
        misses.append(f"tracebacks in {tracebacks}")
    if not stats.conserved:
        misses.append("the counters are not conserved")
    if stats.succeeded != len(completed) or stats.dead_lettered != len(dead_ids):
        misses.append(
            f"succeeded {stats.succeeded}, dead_lettered {stats.dead_lettered}; the records: "
            f"{len(completed)} completed, {len(dead_ids)} dead"
        )
    mismatched = sorted(dead_ids ^ set(failed))
    suspects = sorted({*twice, *lost, *mismatched, *reasons, *not_dead, *unexplained, *accepted})

    def what_happened(job_id: str) -> dict[str, Any]:
        """A job's runs and record, in seconds from the start: for a miss's diagnosis."""
        record = final[job_id]
        return {
            "starts": [f"{pid} at {at - zero:.3f}" for pid, at in starts[job_id]],
            "dones": [f"{pid} at {at - zero:.3f}" for pid, at in dones[job_id]],
            "record": None if record is None else record.state.value,
            "updated": None if record is None else round(record.updated_at - zero, 3),
        }

    return {
        "seed": args.seed,
        "jobs": len(jobs),
        "workers_started": len(fleet.stderr),
        "sigkills": len(killed_at),
        "completed": len(completed),
        "dead_letters": len(dead_ids),
        "lost": len(lost),
        "started_twice": len(twice),
        "sigkilled_running_jobs": len(kill_orphans),
        "slowest_dead_letter_after_sigkill_s": round(slowest_kill, 3),
        "dead_letters_explained": len(failed) - len(unexplained) - len(never_started),
        "dead_letters_never_started": len(never_started),
        "dead_letter_bound": bound,
        "dead_letters_done_before_fault": len(done_before_fault),
        "sigstop": {
            "seconds": round(cont_at - stop.at, 3),
            "running_handlers_caught": len(stop.caught),
            "lapsed_before_sigcont": len(lapsed),
            "late_outcomes": len(late),
            "late_outcomes_accepted": len(accepted),
            "dead_letters_from_stopped_worker": len(stop_dead),
            "dead_lettered_after_stop_s": [
                round(min(refused, default=0.0), 3),
                round(max(refused, default=0.0), 3),
            ],
        },
        "succeeded": stats.succeeded,
        "dead_lettered": stats.dead_lettered,
        "stale_outcomes": stats.stale,
        "conserved": stats.conserved,
        "misses": misses,
        **(
            {
                "diagnosis": {job_id: what_happened(job_id) for job_id in suspects[:20]},
                "faults_s": [
                    f"{kind} {pid} at {at - zero:.3f}"
                    for kind, pid, at in sorted(
                        [*faults, ("sigcont", stop.pid, cont_at)], key=lambda fault: fault[2]
                    )
                ],
            }
            if misses
            else {}
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="handlers per worker")
    parser.add_argument("--min-ms", type=int, default=50, help="shortest handler")
    parser.add_argument("--max-ms", type=int, default=250, help="longest handler")
    parser.add_argument("--fault-until", type=float, default=0.8, help="share of jobs done")
    parser.add_argument("--deadline", type=float, default=90.0, help="seconds, in all")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, reported")
    parser.add_argument("--keep", type=Path, help="run in this new folder and keep its logs")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    try:
        report = run(args)
    except TimeoutError as exc:
        report = {"seed": args.seed, "misses": [str(exc)]}
    print(json.dumps(report, indent=2))
    return 1 if report["misses"] else 0


if __name__ == "__main__":
    sys.exit(main())
