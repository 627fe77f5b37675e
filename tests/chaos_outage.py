"""Outage test: a Redis outage by itself never makes a live pool's jobs run again.

    python tests/chaos_outage.py [--jobs 24] [--ms 3000] [--deadline 170] [--only NAME]
                                 [--keep DIR]

Each scenario has a private Redis (appendonly, fsync always) of its own, two
``trioqueue worker`` processes (4 handlers each, min_idle 2 s, sweeps every
0.5 s) on one queue, and ``--jobs`` jobs whose handler (``chaos_handlers:run``)
logs its start and end and sleeps 3 s, longer than min_idle; every other job
of the second wave sleeps as long as the outage more, so some handlers end
during the outage (their outcomes wait for Redis) and others run through it
(their leases ran out meanwhile). Once the first wave is done and the second
has run for a second, a fault hits Redis:

- ``freeze-0.5x`` .. ``freeze-5x``: SIGSTOP for 0.5, 1, 2 and 5 min_idle, then SIGCONT;
- ``restart-1.5x``, ``restart-5x``: SIGKILL (nothing acknowledged is lost:
  fsync always), and started again on the same port and data 1.5 and 5
  min_idle later (the workers' connections drop, and each comes back on its
  own backoff: one may sweep before the other is back);
- ``cut-2x-staggered``: each worker reaches Redis through a TCP proxy of its
  own; both lines are cut (connections dropped, new ones closed at once) for 2
  min_idle, and one heals half a min_idle after the other, so the first one
  back sweeps while the other's claims have run out;
- ``freeze-2x-sigkill``: SIGSTOP for 2 min_idle, and half a second into it one
  worker process is SIGKILLed and not replaced.

Every scenario must end with every job completed (its record says so, the
counters agree), none lost, no worker ending in a way no fault explains, no
traceback, some handler running through the fault, and no job started twice,
except, with the SIGKILL, jobs whose earlier run was on the killed worker (at
most its 4 handlers' worth); each of that worker's unfinished jobs must run
again on the other one. It prints a JSON report per scenario and exits 1 on
any miss, keeping the scenario's worker logs, execution log and Redis log
(their folder is in the report).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import trio

import trioqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from chaos import Fleet, held, orphans_of, read_log  # noqa: E402
from redis_server import RedisServer, find_server_binary  # noqa: E402
from tcp_line import Line  # noqa: E402

MIN_IDLE = 2.0
SWEEP = 0.5
PROCESSES = 2
CONCURRENCY = 4
QUEUE = "{outage}"
LEAD = 1.0  # seconds the second wave runs before the fault
KILL_AFTER = 0.5  # seconds into the outage the SIGKILL comes


@attrs.frozen
class Scenario:
    name: str
    fault: str  # "freeze", "restart" or "cut"
    leases: float  # the outage, in min_idle
    kill: bool = False
    stagger: float = 0.0  # a cut: one worker's line heals this many min_idle later


SCENARIOS = [
    Scenario("freeze-0.5x", "freeze", 0.5),
    Scenario("freeze-1x", "freeze", 1.0),
    Scenario("freeze-2x", "freeze", 2.0),
    Scenario("freeze-5x", "freeze", 5.0),
    Scenario("restart-1.5x", "restart", 1.5),
    Scenario("restart-5x", "restart", 5.0),
    Scenario("cut-2x-staggered", "cut", 2.0, stagger=0.5),
    Scenario("freeze-2x-sigkill", "freeze", 2.0, kill=True),
]


class OutageFleet(Fleet):
    """`chaos.Fleet` with this test's settings: a longer lease, a slower sweeper.

    Worker *n* reaches Redis at ``urls[n]`` when given (a `Line`), else at ``url``.
    """

    def __init__(self, *args: Any, urls: list[str]) -> None:
        super().__init__(*args)
        self.urls = urls

    def command(self, n: int) -> list[str]:
        """This test's worker command line: its own lease, sweeper and Redis line."""
        url = self.urls[n] if n < len(self.urls) else self.url
        return [
            sys.executable, "-m", "trioqueue", "worker", "chaos_handlers:run",
            "--redis", url, "--queue", QUEUE, "--capacity", str(self.capacity),
            "--workers", str(self.concurrency), "--prefetch", "0",
            "--min-idle", str(MIN_IDLE), "--sweep-interval", str(SWEEP),
            "--max-attempts", "3", "--max-deliveries", "6", "--grace", "10",
        ]  # fmt: skip

    def reap_silently(self) -> list[str]:
        """A worker that ended by itself: no fault here explains it, and none is started."""
        ended = []
        for pid, process in list(self.live.items()):
            status = process.poll()
            if status is not None:
                del self.live[pid]
                self.ended[pid], self.ended_at[pid] = "crashed", time.time()
                ended.append(f"worker {pid} exited by itself with status {status}")
        self.surprises.extend(ended)
        return ended


async def enqueue(url: str, jobs: dict[str, dict[str, Any]]) -> None:
    async with trioqueue.RedisBackend(
        url, queue=QUEUE, capacity=len(jobs) + 1, min_idle=MIN_IDLE
    ) as backend:
        queue = trioqueue.Queue(backend)
        for job_id, payload in jobs.items():
            await queue.enqueue(payload, id=job_id)


async def final_state(
    url: str, ids: list[str]
) -> tuple[trioqueue.MetricsSnapshot, dict[str, trioqueue.JobRecord | None]]:
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        return await backend.stats(), {job_id: await backend.status(job_id) for job_id in ids}


def run_scenario(
    scenario: Scenario, args: argparse.Namespace, workdir: Path, deadline: float
) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    log = workdir / "executions.log"
    server = RedisServer(find_server_binary(), appendonly=True)
    server.start()
    length = scenario.leases * MIN_IDLE
    wave = PROCESSES * CONCURRENCY
    # every other job of the second wave outlasts the outage: running when Redis is back
    jobs = {
        f"o{n}": {"ms": args.ms + (round(length * 1000) if wave <= n < 2 * wave and n % 2 else 0)}
        for n in range(args.jobs)
    }
    lines = [Line(server.port) for _ in range(PROCESSES)] if scenario.fault == "cut" else []
    urls = [line.url for line in lines]
    fleet = OutageFleet(server.url, workdir, log, CONCURRENCY, args.jobs + 1, urls=urls)
    timeline: dict[str, float] = {}
    killed: int | None = None
    try:
        trio.run(enqueue, server.url, jobs)
        timeline["start"] = time.time()
        for _ in range(PROCESSES):
            fleet.start()

        def done_ids() -> set[str]:
            return {e[1] for e in read_log(log) if e[0] == "done"}

        def wait(what: str, ready: Any) -> None:
            while not ready():
                if time.time() > deadline:
                    raise TimeoutError(f"{scenario.name}: {what} not within the deadline")
                fleet.reap_silently()
                time.sleep(0.05)

        # the first wave done, the second running for LEAD seconds: jobs in flight
        wait("the first wave", lambda: len(done_ids()) >= wave)
        time.sleep(LEAD)
        assert server.process is not None
        timeline["fault"] = time.time()
        if scenario.fault == "freeze":
            server.process.send_signal(signal.SIGSTOP)
            if scenario.kill:
                time.sleep(KILL_AFTER)
                events = read_log(log)
                busiest = max(fleet.live, key=lambda pid: len(orphans_of(pid, events)))
                fleet.stop(busiest, signal.SIGKILL, "sigkill")
                killed, timeline["kill"] = busiest, time.time()
                time.sleep(length - KILL_AFTER)
            else:
                time.sleep(length)
            server.process.send_signal(signal.SIGCONT)
        elif scenario.fault == "cut":
            for line in lines:
                line.cut()
            time.sleep(length)
            lines[0].heal()
            timeline["first_healed"] = time.time()
            time.sleep(scenario.stagger * MIN_IDLE)
            for line in lines[1:]:
                line.heal()
        else:
            server.stop(kill=True)
            time.sleep(length)
            server.start()
        timeline["fault_end"] = time.time()
        wait("every job's end", lambda: len(done_ids()) >= len(jobs))
        wait("an empty queue", lambda: trio.run(held, server.url, QUEUE) == 0)
        timeline["empty"] = time.time()
        fleet.reap_silently()
        fleet.stop_all()
        stats, final = trio.run(final_state, server.url, sorted(jobs))
    except BaseException:
        _keep(server, workdir)
        server.close()
        raise
    finally:
        for process in fleet.live.values():
            process.kill()
            process.wait()
        if server.process is not None:
            server.process.send_signal(signal.SIGCONT)
        for line in lines:
            line.close()
    report = analyse(scenario, jobs, read_log(log), fleet, killed, timeline, stats, final)
    if report["misses"] or args.keep:
        report["logs"] = str(workdir)
        _keep(server, workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    server.close()
    return report


def _keep(server: RedisServer, workdir: Path) -> None:
    if (server.dir / "server.log").exists():
        shutil.copy(server.dir / "server.log", workdir / "redis-server.log")


def analyse(
    scenario: Scenario,
    jobs: dict[str, Any],
    events: list[tuple[str, str, int, float]],
    fleet: Fleet,
    killed: int | None,
    timeline: dict[str, float],
    stats: trioqueue.MetricsSnapshot,
    final: dict[str, trioqueue.JobRecord | None],
) -> dict[str, Any]:
    starts: dict[str, list[tuple[int, float]]] = defaultdict(list)
    dones: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for what, job_id, pid, at in events:
        (starts if what == "start" else dones)[job_id].append((pid, at))
    zero = timeline["start"]
    fault, fault_end = timeline["fault"], timeline["fault_end"]
    completed = {
        job_id
        for job_id, record in final.items()
        if record is not None and record.state is trioqueue.JobState.COMPLETED
    }
    lost = sorted(set(jobs) - completed)
    duplicated = sorted(job_id for job_id in jobs if len(starts[job_id]) > 1)
    # a duplicate is explained only by an earlier run on the SIGKILLed worker
    explained = [
        job_id
        for job_id in duplicated
        if killed is not None and any(pid == killed for pid, _ in starts[job_id][:-1])
    ]
    unexplained = sorted(set(duplicated) - set(explained))
    in_flight = sorted(
        job_id
        for job_id in jobs
        if any(at <= fault for _, at in starts[job_id])
        and not any(at <= fault for _, at in dones[job_id])
    )
    spanning = sorted(  # one run from before the fault until after its end
        job_id
        for job_id in jobs
        if any(
            pid == done_pid != killed and started <= fault and ended > fault_end
            for pid, started in starts[job_id]
            for done_pid, ended in dones[job_id]
        )
    )
    last_done = max((at for runs in dones.values() for _, at in runs), default=fault_end)
    report: dict[str, Any] = {
        "scenario": scenario.name,
        "fault": scenario.fault + (" + worker SIGKILL" if scenario.kill else ""),
        "outage_s": round(fault_end - fault, 3),
        "outage_leases": scenario.leases,
        "jobs": len(jobs),
        "in_flight_at_fault": len(in_flight),
        "running_at_fault_end": len(spanning),
        "completed": len(completed),
        "lost": len(lost),
        "duplicates": len(duplicated),
        "duplicates_explained_by_kill": len(explained),
        "duplicates_unexplained": len(unexplained),
        "fault_end_to_last_completion_s": round(last_done - fault_end, 3),
        "succeeded": stats.succeeded,
        "recovered": stats.recovered,
        "stale_outcomes": stats.stale,
        "conserved": stats.conserved,
    }
    misses: list[str] = []
    if killed is not None:
        kill_at = timeline["kill"]
        held_by_killed = orphans_of(killed, [e for e in events if e[3] <= kill_at])
        rerun = [
            job_id
            for job_id in held_by_killed
            if any(pid != killed and at > kill_at for pid, at in starts[job_id])
        ]
        reruns_at = [
            min(at for pid, at in starts[job_id] if pid != killed and at > kill_at)
            for job_id in rerun
        ]
        report["killed_worker_unfinished_jobs"] = len(held_by_killed)
        report["of_them_run_again_elsewhere"] = len(rerun)
        report["slowest_rerun_after_fault_end_s"] = round(
            max(reruns_at, default=fault_end) - fault_end, 3
        )
        if len(rerun) != len(held_by_killed):
            misses.append(
                f"the killed worker's jobs {sorted(set(held_by_killed) - set(rerun))} "
                "never ran again on the other worker"
            )
        if len(explained) > CONCURRENCY:
            misses.append(f"{len(explained)} duplicates > the {CONCURRENCY} jobs one worker holds")
    if lost:
        misses.append(f"lost {len(lost)}: {lost[:10]}")
    if unexplained:
        misses.append(f"duplicates no crash explains: {unexplained}")
    if stats.succeeded != len(jobs) or not stats.conserved:
        misses.append(f"succeeded {stats.succeeded} of {len(jobs)}, conserved={stats.conserved}")
    if not spanning:
        misses.append("no job ran through the fault: the test proved nothing")
    misses.extend(fleet.surprises)
    tracebacks = [p.name for p in fleet.stderr.values() if "Traceback" in p.read_text()]
    if tracebacks:
        misses.append(f"tracebacks in {tracebacks}")
    if unexplained:  # what happened, for the diagnosis
        report["duplicate_runs"] = {
            job_id: {
                "starts": [(pid, round(at - zero, 3)) for pid, at in starts[job_id]],
                "dones": [(pid, round(at - zero, 3)) for pid, at in dones[job_id]],
            }
            for job_id in unexplained
        }
    # seconds from the workers' start; the worker logs' clock: "start" is started_at
    report["timeline_s"] = {what: round(at - zero, 3) for what, at in timeline.items()}
    report["started_at"] = time.strftime("%H:%M:%S", time.localtime(zero)) + f"{zero % 1:.3f}"[1:]
    report["misses"] = misses
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--ms", type=int, default=3000, help="each handler's sleep")
    parser.add_argument("--deadline", type=float, default=170.0, help="seconds, in all")
    parser.add_argument("--only", action="append", help="run this scenario (repeatable)")
    parser.add_argument("--keep", type=Path, help="keep every scenario's logs in DIR")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    if not chosen:
        parser.error(f"--only takes {', '.join(s.name for s in SCENARIOS)}")
    began = time.time()
    deadline = began + args.deadline
    base = args.keep or Path(tempfile.mkdtemp(prefix="trioqueue-chaos-outage-"))
    reports = []
    for scenario in chosen:
        try:
            report = run_scenario(scenario, args, base / scenario.name, deadline)
        except Exception as exc:  # a timeout: reported, with its logs, like any miss
            logs = str(base / scenario.name)
            report = {"scenario": scenario.name, "misses": [repr(exc)], "logs": logs}
        print(json.dumps(report), flush=True)
        reports.append(report)
    if not args.keep and not any(r["misses"] for r in reports):
        shutil.rmtree(base, ignore_errors=True)
    failed = [r["scenario"] for r in reports if r["misses"]]
    summary = {"scenarios": len(reports), "failed": failed, "seconds": round(time.time() - began)}
    print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
