"""Fsync test: what Redis with ``appendfsync everysec`` loses when it dies under a busy queue.

    python tests/chaos_fsync.py [--crash process|os] [--rate 300] [--deadline 90]
                                [--seed N] [--keep DIR]

On a private Redis (appendonly, ``appendfsync everysec``: the Redis default for
AOF, where our other tests use ``always``) it runs ``--workers`` ``trioqueue
worker`` processes (8 handlers each, reliable mode, min_idle 1 s, sweeps every
0.25 s) on one queue, and a producer that enqueues jobs of 20-100 ms at a steady
``--rate`` with ids f0, f1, ..., noting when each ``enqueue`` returned (the
acknowledgement); on `BackendUnavailable` it retries the same id (enqueue is
idempotent), and an id counts as acknowledged only once a call returns. A few
seconds in, Redis is SIGKILLed mid-write, stays down ``--outage`` seconds and
is started again on the same port and data; the workers reconnect by
themselves, the producer goes on for ``--after`` seconds, then stops. Once every
job Redis still holds is finished, the workers get SIGTERM.

``--crash process`` (the default) is a SIGKILL alone: what a Redis crash, an
OOM kill or a ``kill -9`` does. What the server wrote is in the kernel's page
cache, fsynced or not, so it survives. ``--crash os`` also plays the machine
dying (power cut, kernel panic), where everything not fsynced is gone: after the
SIGKILL the AOF is cut back to its size ``--unsynced`` seconds before the kill
(the everysec window), plus a few bytes of the next write, so the server must
load a torn AOF (``aof-load-truncated yes``, the Redis default).

It reports (JSON) the acknowledged enqueues whose record is gone (lost), the
largest span between one's acknowledgement and the kill (the fsync window as
seen), how many lost jobs had run anyway; the jobs whose handler ran twice, each
put down to what Redis forgot (a completion or a claim); the completed jobs;
the enqueues acknowledged and handlers finished in the second before the kill
(the fault hit a busy queue: the test is not vacuous). Losing jobs is measured,
not a miss. It exits 1 when one of these is missed, which must hold whatever
fsync policy:

- Redis starts again from its AOF, and ran with appendfsync everysec;
- every lost job was acknowledged within 2 s before the kill (nothing older);
- nothing is lost or runs twice when nothing was rewound (``--crash process``
  with no lost enqueue), and every twice-run job's first run touched Redis in
  the rewound span;
- every job Redis kept completes (none stuck ready, claimed or waiting);
- the queue's counters are conserved after the restart;
- every worker did work after the restart, none ended in a way no fault
  explains (SIGTERM exits 0, or 3 when handlers were cancelled), no traceback;
- the kill hit while enqueues and completions were happening.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import socket
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
from chaos import Fleet, read_log, records  # noqa: E402
from redis_server import RedisServer, find_server_binary  # noqa: E402

MIN_IDLE = 1.0
SWEEP = 0.25
QUEUE = "{fsync}"
CAPACITY = 100_000  # the producer never waits for room: its rate is its own
WINDOW = 2.0  # seconds: the most everysec may lose (1 s fsync period, up to 2 s of delay)
SLACK = 0.5  # seconds between a handler's log line and its claim or outcome in Redis
BUSY = 1.0  # the span before the kill whose enqueues and completions are counted

Event = tuple[str, str, int, float]


class FsyncFleet(Fleet):
    """`chaos.Fleet` on this test's queue, in reliable mode; no worker is ever replaced."""

    def command(self, n: int) -> list[str]:
        """This test's worker command line."""
        return [
            sys.executable, "-m", "trioqueue", "worker", "chaos_handlers:run",
            "--redis", self.url, "--queue", QUEUE, "--capacity", str(self.capacity),
            "--workers", str(self.concurrency), "--prefetch", "0",
            "--min-idle", str(MIN_IDLE), "--sweep-interval", str(SWEEP),
            "--max-attempts", "3", "--max-deliveries", "6", "--grace", "10",
        ]  # fmt: skip

    def reap_silently(self) -> None:
        """A worker that ended by itself: no fault here explains it, and none is started."""
        for pid, process in list(self.live.items()):
            status = process.poll()
            if status is not None:
                del self.live[pid]
                self.ended[pid], self.ended_at[pid] = "crashed", time.time()
                self.surprises.append(f"worker {pid} exited by itself with status {status}")


@attrs.define
class Production:
    """What the producer did: every id it tried, and when its enqueue returned."""

    payloads: dict[str, dict[str, Any]] = attrs.Factory(dict)
    acked: dict[str, float] = attrs.Factory(dict)
    retried: set[str] = attrs.Factory(set)
    unavailable: list[float] = attrs.Factory(list)  # when a call raised BackendUnavailable
    errors: list[str] = attrs.Factory(list)  # anything else it raised


@attrs.define
class Timeline:
    producing: float = 0.0
    kill: float = 0.0
    durable: float = 0.0  # --crash os: the moment whose AOF size the file was cut back to
    restarted: float = 0.0
    stopped: float = 0.0
    drained: float = 0.0


async def produce(
    url: str, rate: float, rng: random.Random, stop: trio.Event, out: Production
) -> None:
    async with trioqueue.RedisBackend(
        url, queue=QUEUE, capacity=CAPACITY, min_idle=MIN_IDLE
    ) as backend:
        queue = trioqueue.Queue(backend)
        n, next_at = 0, trio.current_time()
        while not stop.is_set():
            # a steady pace: after an outage it goes on at the rate, not in a burst
            next_at = max(next_at + 1 / rate, trio.current_time() - 0.05)
            await trio.sleep_until(next_at)
            job_id, payload = f"f{n}", {"ms": rng.randint(20, 100)}
            out.payloads[job_id] = payload
            while True:
                try:
                    await queue.enqueue(payload, id=job_id)
                except trioqueue.BackendUnavailable:
                    out.unavailable.append(time.time())
                    out.retried.add(job_id)
                    await trio.sleep(0.05)
                except Exception as exc:  # reported as a miss; the run goes on
                    out.errors.append(f"{job_id}: {exc!r}")
                    await trio.sleep(0.05)
                else:
                    break
            out.acked[job_id] = time.time()
            n += 1


def newest_aof(server: RedisServer) -> Path | None:
    """The AOF file the server appends to (Redis 7: the highest incr file), if any."""
    found = sorted(
        (server.dir / "appendonlydir").glob("*.incr.aof"),
        key=lambda p: int(p.name.split(".")[-3]),
    )
    if found:
        return found[-1]
    single = server.dir / "appendonly.aof"  # Redis < 7
    return single if single.exists() else None


async def sample_aof(server: RedisServer, until: trio.Event, out: list[tuple[float, int]]) -> None:
    """Note the AOF's size every 10 ms: what was written by then."""
    while not until.is_set():
        path = newest_aof(server)
        if path is not None:
            out.append((time.time(), path.stat().st_size))
        await trio.sleep(0.01)


def config_get(port: int, name: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(f"CONFIG GET {name}\r\n".encode())
        reply = b""
        while reply.count(b"\r\n") < 5:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    lines = reply.decode().split("\r\n")
    return lines[4] if len(lines) > 4 else ""


async def queue_state(url: str) -> trioqueue.MetricsSnapshot:
    async with trioqueue.RedisBackend(url, queue=QUEUE, min_idle=MIN_IDLE) as backend:
        return await backend.stats()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The test in a temporary directory of its own, removed afterwards (unless --keep)."""
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return run_in(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="trioqueue-chaos-fsync-") as folder:
        return run_in(args, Path(folder))


def run_in(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    log = workdir / "executions.log"
    server = RedisServer(find_server_binary(), appendonly=True, extra=("--appendfsync", "everysec"))
    server.start()
    fleet = FsyncFleet(server.url, workdir, log, args.concurrency, CAPACITY)
    production = Production()
    timeline = Timeline()
    facts: dict[str, Any] = {"appendfsync": config_get(server.port, "appendfsync")}
    try:
        trio.run(scenario, args, rng, server, fleet, production, timeline, facts)
    except Exception as exc:  # a timeout, Redis not starting again: reported as a miss
        facts["error"] = repr(exc)
    finally:
        for process in fleet.live.values():
            process.kill()
            process.wait()
        if args.keep and (server.dir / "server.log").exists():
            shutil.copy(server.dir / "server.log", workdir / "redis-server.log")
        server_log = server.dir / "server.log"
        facts["redis_log"] = server_log.read_text() if server_log.exists() else ""
        server.close()
    return analyse(args, read_log(log), fleet, production, timeline, facts)


async def scenario(
    args: argparse.Namespace,
    rng: random.Random,
    server: RedisServer,
    fleet: FsyncFleet,
    production: Production,
    timeline: Timeline,
    facts: dict[str, Any],
) -> None:
    began = time.time()
    give_up = began + args.deadline

    for _ in range(args.workers):
        fleet.start()
    while not all("worker on" in fleet.stderr[pid].read_text() for pid in fleet.live):
        if time.time() > give_up:
            raise TimeoutError(f"the workers' start not within --deadline {args.deadline}s")
        fleet.reap_silently()
        await trio.sleep(0.05)
    stop, killed = trio.Event(), trio.Event()
    sizes: list[tuple[float, int]] = []
    # the producer retries until Redis answers: this bounds the wait if it never does
    with trio.fail_at(trio.current_time() + give_up - time.time()):
        async with trio.open_nursery() as nursery:
            timeline.producing = time.time()
            nursery.start_soon(produce, server.url, args.rate, rng, stop, production)
            nursery.start_soon(sample_aof, server, killed, sizes)
            await trio.sleep(rng.uniform(args.kill_after, args.kill_after + 1))
            fleet.reap_silently()
            timeline.kill = time.time()  # SIGKILL, mid-write: the producer and workers are busy
            await trio.to_thread.run_sync(functools.partial(server.stop, kill=True))
            killed.set()
            if args.crash == "os":
                facts.update(cut_back(server, sizes, timeline, rng, args.unsynced))
            await trio.sleep(args.outage)
            try:
                await trio.to_thread.run_sync(server.start)
            except RuntimeError as exc:
                facts["restart_failed"] = str(exc)
                stop.set()
                raise
            timeline.restarted = time.time()
            await trio.sleep(args.after)
            stop.set()
    timeline.stopped = time.time()
    fleet.reap_silently()
    # every job Redis kept finished: nothing ready, stored, claimed or waiting to retry
    while True:
        gauges = (await queue_state(server.url)).gauges
        if gauges.held == 0 and gauges.queue_depth == 0:
            timeline.drained = time.time()
            break
        if time.time() > give_up:  # reported, with what is left, rather than raised
            facts["undrained"] = attrs.asdict(gauges)
            break
        fleet.reap_silently()
        await trio.sleep(0.25)
    fleet.reap_silently()
    fleet.stop_all()
    facts["stats"] = await queue_state(server.url)
    facts["records"] = await records(server.url, sorted(production.payloads), QUEUE)


def cut_back(
    server: RedisServer,
    sizes: list[tuple[float, int]],
    timeline: Timeline,
    rng: random.Random,
    unsynced: float,
) -> dict[str, Any]:
    """Play an OS crash: the AOF as it was *unsynced* s before the kill, plus a torn write."""
    path = newest_aof(server)
    assert path is not None
    before = [(at, size) for at, size in sizes if at <= timeline.kill - unsynced]
    durable_at, size = before[-1] if before else sizes[0]
    written = path.stat().st_size
    torn = min(rng.randint(1, 40), max(0, written - size - 1))
    with path.open("r+b") as file:
        file.truncate(size + torn)
    timeline.durable = durable_at
    return {"aof_bytes_written": written, "aof_bytes_kept": size + torn, "aof_torn_bytes": torn}


def analyse(
    args: argparse.Namespace,
    events: list[Event],
    fleet: Fleet,
    production: Production,
    timeline: Timeline,
    facts: dict[str, Any],
) -> dict[str, Any]:
    starts: dict[str, list[tuple[int, float]]] = defaultdict(list)
    dones: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for what, job_id, pid, at in events:
        (starts if what == "start" else dones)[job_id].append((pid, at))
    kill, zero = timeline.kill, timeline.producing
    final: dict[str, trioqueue.JobRecord | None] = facts.get("records", {})
    stats: trioqueue.MetricsSnapshot | None = facts.get("stats")
    acked = production.acked
    lost = sorted((job_id for job_id in acked if final.get(job_id) is None), key=_number)
    spans = [kill - acked[job_id] for job_id in lost]
    completed = [j for j, r in final.items() if r is not None and r.state is _COMPLETED]
    unfinished = {
        job_id: record.state.value
        for job_id, record in final.items()
        if record is not None and record.state is not _COMPLETED
    }
    # Redis forgot something: the OS crash cut it back, or an acknowledged enqueue is gone
    rewound = args.crash == "os" or bool(lost)
    durable = (
        timeline.durable if args.crash == "os" else min((acked[j] for j in lost), default=kill)
    )
    causes: dict[str, list[str]] = defaultdict(list)
    for job_id in sorted((j for j in starts if len(starts[j]) > 1), key=_number):
        causes[_cause(starts[job_id], dones[job_id], kill, durable, rewound)].append(job_id)
    duplicated = sum(map(len, causes.values()))
    reruns = [starts[job_id][1][1] for ids in causes.values() for job_id in ids]
    after = [pid for pid in fleet.ended if fleet.ended[pid] == "stopped"]
    idle_after = [
        pid
        for pid in after
        if not any(p == pid and at > timeline.restarted for _, _, p, at in events)
    ]
    aof_loaded_torn = "aof-load-truncated" in facts["redis_log"] or (
        "Unexpected end of file" in facts["redis_log"] and "truncated" in facts["redis_log"]
    )
    report: dict[str, Any] = {
        "crash": args.crash,
        "appendfsync": facts["appendfsync"],
        "workers": args.workers,
        "rate_per_s": args.rate,
        "enqueued_acknowledged": len(acked),
        "acked_in_second_before_kill": sum(kill - BUSY <= at <= kill for at in acked.values()),
        "done_in_second_before_kill": sum(
            kill - BUSY <= at <= kill for runs in dones.values() for _, at in runs
        ),
        "producer_retried_ids": len(production.retried),
        "producer_unavailable_s": round(
            max(production.unavailable, default=kill) - min(production.unavailable, default=kill),
            3,
        ),
        "lost": len(lost),
        "lost_ids": _ranges(lost),
        "lost_that_ran_anyway": sum(bool(starts[job_id]) for job_id in lost),
        "lost_window_s": round(max(spans, default=0.0), 3),
        "lost_newest_s": round(min(spans, default=0.0), 3),
        "completed": len(completed),
        "ran_twice": duplicated,
        "ran_twice_because": {cause: len(ids) for cause, ids in causes.items()},
        "ran_twice_ids": {cause: _ranges(ids) for cause, ids in causes.items()},
        # from Redis being back to the last second run's start: a forgotten claim waits out
        # its lease, and one more after the silence (sweep.lua)
        "slowest_rerun_after_restart_s": round(max(reruns) - timeline.restarted, 3)
        if reruns
        else None,
        "not_completed": len(unfinished),
        "aof_loaded_truncated": aof_loaded_torn,
        # everysec holds a write back (acknowledged, in memory only) while an fsync is slow
        "aof_writes_postponed": "fsync is taking too long" in facts["redis_log"],
        "timeline_s": {  # seconds from the producer's start
            "kill": round(kill - zero, 3),
            "restarted": round(timeline.restarted - zero, 3),
            "producer_stopped": round(timeline.stopped - zero, 3),
            "drained": round(timeline.drained - zero, 3) if timeline.drained else None,
        },
    }
    if args.crash == "os":
        report["durable_before_kill_s"] = round(kill - durable, 3)
        for key in ("aof_bytes_written", "aof_bytes_kept", "aof_torn_bytes"):
            report[key] = facts.get(key)
    if stats is not None:
        report["stats"] = {
            "enqueued": stats.enqueued,
            "succeeded": stats.succeeded,
            "deduplicated": stats.deduplicated,
            "recovered": stats.recovered,
            "stale": stats.stale,
            "conserved": stats.conserved,
        }
    report["worker_exits"] = {
        str(pid): how for pid, how in sorted(fleet.ended.items())
    }  # stopped: SIGTERM at the end, exit 0 or 3 (else a surprise below)

    misses: list[str] = []
    if facts["appendfsync"] != "everysec":
        misses.append(f"Redis ran with appendfsync {facts['appendfsync']!r}, not everysec")
    if "error" in facts:
        misses.append(f"the run did not end: {facts['error']}")
    if "restart_failed" in facts:
        misses.append(f"Redis did not start again from its AOF: {facts['restart_failed']}")
    old = [job_id for job_id in lost if kill - acked[job_id] > WINDOW]
    if old:
        misses.append(f"lost jobs acknowledged more than {WINDOW}s before the kill: {old[:10]}")
    if causes.get("unexplained"):
        misses.append(f"ran twice, nothing Redis forgot explains it: {causes['unexplained'][:10]}")
    if unfinished:
        misses.append(f"not completed: {dict(list(unfinished.items())[:10])}")
    if "undrained" in facts:
        misses.append(f"jobs still held at the deadline: {facts['undrained']}")
    if stats is None or not stats.conserved:
        misses.append(f"counters not conserved: {stats}")
    if idle_after:
        misses.append(f"workers that did no work after the restart: {idle_after}")
    misses.extend(fleet.surprises)
    misses.extend(f"the producer got {error}" for error in production.errors[:10])
    tracebacks = [p.name for p in fleet.stderr.values() if "Traceback" in p.read_text()]
    if tracebacks:
        misses.append(f"tracebacks in {tracebacks}")
    if not (report["acked_in_second_before_kill"] and report["done_in_second_before_kill"]):
        misses.append("the kill hit an idle queue: the test proved nothing")
    if len(final) != len(production.payloads):
        misses.append("not every job's record was read: the run did not end")
    report["misses"] = misses
    return report


_COMPLETED = trioqueue.JobState.COMPLETED


def _cause(
    starts: list[tuple[int, float]],
    dones: list[tuple[int, float]],
    kill: float,
    durable: float,
    rewound: bool,
) -> str:
    """Why a job ran twice: what of its first run Redis forgot."""
    pid, started = starts[0]
    ended = min((at for p, at in dones if p == pid and at >= started), default=None)
    if not rewound:
        return "unexplained"
    if ended is not None and durable - SLACK <= ended <= kill:
        return "completion forgotten"  # it finished before the kill; its outcome was not kept
    if durable - SLACK <= started <= kill:
        # it ran through the kill, and its outcome came to a Redis that had forgotten its
        # claim: refused (stale), and the job, back on the queue, ran again
        return "claim forgotten"
    return "unexplained"


def _number(job_id: str) -> int:
    return int(job_id[1:])


def _ranges(ids: list[str]) -> str:
    """f3, f5-f9: the ids, short."""
    numbers = sorted(map(_number, ids))
    parts: list[str] = []
    for n in numbers:
        if parts and parts[-1].endswith(f"-f{n - 1}"):
            parts[-1] = parts[-1].rsplit("-", 1)[0] + f"-f{n}"
        elif parts and parts[-1] == f"f{n - 1}":
            parts[-1] += f"-f{n}"
        else:
            parts.append(f"f{n}")
    return ", ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crash", choices=("process", "os"), default="process")
    parser.add_argument("--unsynced", type=float, default=1.0, help="--crash os: seconds lost")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="handlers per worker")
    parser.add_argument("--rate", type=float, default=300.0, help="enqueues per second")
    parser.add_argument("--kill-after", type=float, default=3.0, help="seconds, plus 0-1")
    parser.add_argument("--outage", type=float, default=1.0, help="seconds Redis stays down")
    parser.add_argument("--after", type=float, default=2.0, help="seconds of production after")
    parser.add_argument("--deadline", type=float, default=90.0, help="seconds, in all")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", type=Path, help="keep the logs in DIR")
    args = parser.parse_args()
    if args.crash == "os" and not 0 < args.unsynced <= WINDOW - SLACK:
        parser.error(f"--unsynced must lie in (0, {WINDOW - SLACK}]: the check allows {WINDOW}")
    began = time.time()
    report = run(args)
    report["seconds"] = round(time.time() - began, 1)
    print(json.dumps(report, indent=2))
    return 1 if report["misses"] else 0


if __name__ == "__main__":
    sys.exit(main())
