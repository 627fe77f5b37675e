"""How long Redis itself spends in one command of each trioqueue operation, on a big queue.

    python benchmarks/script_time.py [--in-flight 100000] [--ready 100000] [--dead 10000]
                                     [--rounds 5] [--quick]

Redis runs one command at a time: a script that takes 50 ms stalls every other
client of the server for 50 ms. This measures, on a private server, the time
Redis reports in its SLOWLOG (``slowlog-log-slower-than 0``: every command) for
each command an operation sends: not round trips, and not client-side work.
EVALSHA entries are named after their script by its SHA-1.

Set-up (not measured): ``--ready + --in-flight + --dead`` jobs are submitted,
``--dead`` of them claimed and dead-lettered, ``--in-flight`` claimed in batches
of 1,000 with a 300 s lease (a batch is several claim calls: one takes at most
100), and ``--ready`` left ready. The backend runs on a manual clock, so a
jump of the clock expires chosen claims at once.

Each operation then runs --rounds times; the table shows the longest server
time of one command over the rounds, the median over the rounds of each call's
longest command, and the call's wall time (round trip and Python included).
Logging every command costs time inside a script too (each ``redis.call`` is
logged), so every round is repeated with the SLOWLOG off, reading the scripts'
time from INFO commandstats instead. "Newest"/"oldest" say which claims (or
dead letters) the operation touches: when claims sat in the processing list,
``LREM`` found the newest first and the oldest last.

Writes ``benchmarks/results/script_time.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import coredis
import coredis.exceptions
import trio
from _common import RESULTS, RedisServer, find_server_binary, machine

import trioqueue
from trioqueue._backends.redis._scripts import load_sources

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BATCH: Final = 1000  # claims per set-up claim call, and expired claims per recovery sweep
LEASE: Final = 300.0  # the set-up claims' lease, and the backend's min_idle
LONG_LEASE: Final = 3600.0  # claims made while measuring: never expire by accident
STEP: Final = 0.01  # clock seconds between set-up claim batches: each batch expires alone
OPS: Final = 32  # claims per claim / renew / release call
PRODUCERS: Final = 64  # concurrent submit tasks in the set-up
MONITOR: Final = "script-time-monitor"  # the SLOWLOG reader's client name: its own entries
SLOWLOG_MAX: Final = 1_000_000
BUDGET_MS: Final = 5.0  # a longer command is shown in bold


def _sha(source: str) -> str:
    """A script's id in Redis (``EVALSHA``)."""
    return hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()


class ManualClock:
    """The backend's clock: it moves only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Server:
    """What Redis spent on the commands of one call: from its SLOWLOG, or its commandstats.

    With ``slowlog-log-slower-than 0`` Redis also logs every ``redis.call`` a script
    makes (client address ``?:0``), and logging them costs script time too: the
    control pass turns the SLOWLOG off and reads each script's time from INFO
    commandstats (``cmdstat_evalsha`` usec), to show what the logging added.
    """

    def __init__(self, client: coredis.Redis[bytes]) -> None:
        self.client = client
        self.sources = load_sources()
        self.scripts = {_sha(source): name for name, source in self.sources.items()}
        self.logging = False

    async def start(self) -> None:
        """Load the scripts (no NOSCRIPT round trip in a measured call); log every command."""
        for sha, name in self.scripts.items():
            loaded = (await self.client.script_load(self.sources[name])).decode()
            assert loaded == sha, f"{name}: Redis says {loaded}, hashlib says {sha}"
        await self.log_all(on=True)

    async def log_all(self, *, on: bool) -> None:
        threshold = 0 if on else -1
        await self.client.config_set(
            {"slowlog-log-slower-than": threshold, "slowlog-max-len": SLOWLOG_MAX}
        )
        await self.client.slowlog_reset()
        self.logging = on

    async def scripts_run(self) -> tuple[int, int]:
        """Script calls so far, and the microseconds Redis spent in them (nested calls too)."""
        stats = await self.client.info("commandstats")
        found = [stats.get(f"cmdstat_{name}", {}) for name in ("evalsha", "eval")]
        return sum(int(s.get("calls", 0)) for s in found), sum(int(s.get("usec", 0)) for s in found)

    async def wait_idle(self) -> None:
        """Wait until Redis answers again: a script the client gave up on may still run."""
        while True:
            try:
                await self.client.ping()
            except coredis.exceptions.ResponseError as exc:
                if not str(exc).startswith("BUSY"):
                    raise
                await trio.sleep(0.1)
            else:
                return

    async def read(self) -> tuple[list[tuple[str, int]], int]:
        """The commands clients sent since the last reset, oldest first, as (name,
        microseconds), and how many ``redis.call``s scripts made meanwhile."""
        length = await self.client.slowlog_len()
        if length >= SLOWLOG_MAX:
            raise RuntimeError(f"SLOWLOG holds {length:,} entries: some were dropped")
        entries = await self.client.slowlog_get(length) if length else ()
        await self.client.slowlog_reset()
        found, nested = [], 0
        for entry in reversed(entries):
            if entry.client_name in (MONITOR, MONITOR.encode()):
                continue
            if entry.client_addr in (b"?:0", "?:0"):  # a script's redis.call
                nested += 1
                continue
            words = [w.decode() if isinstance(w, bytes) else str(w) for w in entry.command]
            name = words[0].upper()
            if name.startswith("EVALSHA") and len(words) > 1:
                name = self.scripts.get(words[1].lower(), f"{name} {words[1][:8]}")
            elif name == "EVAL" and len(words) > 1:
                name = self.scripts.get(_sha(words[1]), "EVAL ?")
            found.append((name, int(entry.duration)))
        return found, nested


class Bench:
    """The measured calls, grouped by operation."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.calls: dict[str, list[dict[str, Any]]] = {}
        self.control: dict[str, list[dict[str, Any]]] = {}

    async def _run(self, call: Callable[[], Awaitable[Any]]) -> tuple[Any, float, bool]:
        """*call*'s result (None if the client gave up waiting), wall seconds, gave up."""
        started = time.perf_counter()
        try:
            result = await call()
        except trioqueue.BackendUnavailable as exc:  # a script longer than the I/O timeout
            print(f"  the client gave up: {exc}", flush=True)
            await self.server.wait_idle()
            return None, time.perf_counter() - started, True
        return result, time.perf_counter() - started, False

    async def measure(self, label: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run *call* once between two reads of the server's figures; its result."""
        if not self.server.logging:
            return await self._control(label, call)
        await self.server.client.slowlog_reset()
        result, wall, gave_up = await self._run(call)
        entries, nested = await self.server.read()
        longest = max(entries, key=lambda e: e[1], default=("–", 0))
        record = {
            "wall_ms": wall * 1000,
            "server_max_ms": longest[1] / 1000,
            "longest_command": longest[0],
            "server_total_ms": sum(us for _, us in entries) / 1000,
            "commands": len(entries),
            "nested_calls": nested,
            "top_ms": [[n, us / 1000] for n, us in sorted(entries, key=lambda e: -e[1])[:3]],
            "client_gave_up": gave_up,
        }
        if isinstance(result, trioqueue.SweepReport):
            record["recovered"] = result.recovered
        self.calls.setdefault(label, []).append(record)
        return result

    async def _control(self, label: str, call: Callable[[], Awaitable[Any]]) -> Any:
        calls, usec = await self.server.scripts_run()
        result, wall, gave_up = await self._run(call)
        calls_after, usec_after = await self.server.scripts_run()
        if calls_after > calls:  # else it ran no script: nothing to compare
            record = {
                "wall_ms": wall * 1000,
                "scripts_ms": (usec_after - usec) / 1000,
                "client_gave_up": gave_up,
            }
            self.control.setdefault(label, []).append(record)
        return result

    def summary(self) -> dict[str, dict[str, Any]]:
        out = {}
        for label, runs in self.calls.items():
            worst = max(runs, key=lambda r: r["server_max_ms"])
            control = self.control.get(label, [])
            out[label] = {
                "longest_ms": worst["server_max_ms"],
                "longest_command": worst["longest_command"],
                "median_ms": statistics.median(r["server_max_ms"] for r in runs),
                "server_total_median_ms": statistics.median(r["server_total_ms"] for r in runs),
                "commands_median": statistics.median(r["commands"] for r in runs),
                "nested_calls_median": statistics.median(r["nested_calls"] for r in runs),
                "wall_median_ms": statistics.median(r["wall_ms"] for r in runs),
                "client_gave_up": sum(r["client_gave_up"] for r in runs),
                "runs": runs,
                "slowlog_off": {
                    "scripts_median_ms": statistics.median(r["scripts_ms"] for r in control),
                    "scripts_max_ms": max(r["scripts_ms"] for r in control),
                    "wall_median_ms": statistics.median(r["wall_ms"] for r in control),
                    "runs": control,
                }
                if control
                else None,
            }
        return out


async def claim_many(
    backend: trioqueue.RedisBackend, jobs: int, lease: float
) -> list[trioqueue.Claim]:
    """Claim *jobs* ready jobs (one script claims at most 100), or all there are."""
    claims: list[trioqueue.Claim] = []
    while len(claims) < jobs and (
        more := await backend.claim(jobs - len(claims), lease=lease, block=0)
    ):
        claims += more
    return claims


async def submit_all(queue: trioqueue.Queue, jobs: int) -> None:
    async def produce(numbers: range) -> None:
        for i in numbers:
            await queue.submit({"i": i})

    async with trio.open_nursery() as nursery:
        for p in range(PRODUCERS):
            nursery.start_soon(produce, range(p, jobs, PRODUCERS))


async def set_up(
    backend: trioqueue.RedisBackend, clock: ManualClock, ready: int, in_flight: int, dead: int
) -> list[list[trioqueue.Claim]]:
    """Fill the queue; the in-flight claims by batch, oldest batch first."""
    started = time.perf_counter()
    await submit_all(trioqueue.Queue(backend), ready + in_flight + dead)
    print(f"set-up: submitted {ready + in_flight + dead:,} jobs", flush=True)
    left = dead
    while left:
        claims = await claim_many(backend, min(BATCH, left), LEASE)
        async with trio.open_nursery() as nursery:
            for claim in claims:
                nursery.start_soon(backend.dead_letter, claim, None, "bench")
        left -= len(claims)
    batches = []
    first = clock.now
    left = in_flight
    while left:
        clock.now = first + len(batches) * STEP
        batches.append(await claim_many(backend, min(BATCH, left), LEASE))
        left -= len(batches[-1])
    clock.now = first + len(batches) * STEP + 1.0
    info = await backend.inspect()
    print(
        f"set-up: {info.ready:,} ready, {info.claims:,} in flight, {info.dead:,} dead "
        f"in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return batches


async def measure_ops(
    bench: Bench,
    backend: trioqueue.RedisBackend,
    clock: ManualClock,
    rounds: int,
    oldest: list[trioqueue.Claim],
) -> None:
    """Every operation, *rounds* times, on the full queue."""
    queue = trioqueue.Queue(backend)
    m = bench.measure
    for _ in range(rounds):
        await m("sweep (nothing expired)", backend.sweep)
        claims = await m(f"claim {OPS}", partial(backend.claim, OPS, lease=LONG_LEASE, block=0))
        await m(f"renew {OPS}", partial(backend.renew, claims, lease=LONG_LEASE))
        await m(f"release {OPS} (newest)", partial(backend.release, claims))
        [newest] = await backend.claim(1, lease=LONG_LEASE, block=0)
        await m("ack (newest claim)", partial(backend.ack, newest))
        await m("ack (oldest claim)", partial(backend.ack, oldest.pop(0)))
        tails = [oldest.pop(0) for _ in range(OPS)]
        await m(f"release {OPS} (oldest)", partial(backend.release, tails))
        await m("stats", backend.stats)
        await m("inspect", backend.inspect)
        await m("pending", backend.pending)
        letters = await m("dead_letters (client side too)", backend.dead_letters)
        if letters:
            await m("purge_dead one (oldest)", partial(backend.purge_dead, letters[0].id))
        if len(letters) > 1:
            await m("purge_dead one (newest)", partial(backend.purge_dead, letters[-1].id))
        await m("Queue.enqueue one", partial(queue.enqueue, {"i": -1}))
        # a dead worker's newest claims
        await claim_many(backend, BATCH, 1.0)
        clock.now += 2.0
        await m(f"sweep ({BATCH} expired, newest)", backend.sweep)


async def measure_recovery(
    bench: Bench,
    backend: trioqueue.RedisBackend,
    clock: ManualClock,
    batches: list[list[trioqueue.Claim]],
    first: float,
    which: range,
) -> None:
    """Sweeps that recover the oldest claims, a batch each."""
    for k in which:
        clock.now = first + k * STEP + LEASE + STEP / 2  # batch k expires, no later one
        await bench.measure(f"sweep ({BATCH} expired, oldest)", backend.sweep)
        await claim_many(backend, len(batches[k]), LONG_LEASE)  # as many in flight


async def run(url: str, settings: dict[str, int]) -> dict[str, Any]:
    ready, in_flight, dead = settings["ready"], settings["in_flight"], settings["dead"]
    rounds = settings["rounds"]
    clock = ManualClock(time.time())
    first = clock.now
    backend = trioqueue.RedisBackend(
        url,
        queue="{script-time}",
        min_idle=LEASE,
        capacity=ready + in_flight + dead + 100_000,
        clock=clock,
    )
    monitor: coredis.Redis[bytes] = coredis.Redis.from_url(
        url, decode_responses=False, client_name=MONITOR
    )
    async with backend, monitor:
        batches = await set_up(backend, clock, ready, in_flight, dead)
        server = Server(monitor)
        await server.start()
        bench = Bench(server)
        oldest = [claim for batch in batches for claim in batch]
        await measure_ops(bench, backend, clock, rounds, oldest)
        print("measured with the SLOWLOG on; again with it off", flush=True)
        await server.log_all(on=False)
        await measure_ops(bench, backend, clock, rounds, oldest)
        # the first batch lost claims to the "oldest" measurements: recover the rest
        clock.now = first + LEASE + STEP / 2
        await backend.sweep()
        await claim_many(backend, BATCH, LONG_LEASE)  # as many in flight
        last = len(batches) - 1
        await server.log_all(on=True)
        await measure_recovery(
            bench, backend, clock, batches, first, range(1, min(rounds, last) + 1)
        )
        await server.log_all(on=False)
        control = range(rounds + 1, min(2 * rounds, last) + 1)
        await measure_recovery(bench, backend, clock, batches, first, control)
        info = await monitor.info("server")
    return {"redis_version": str(info.get("redis_version")), "operations": bench.summary()}


def _ms(value: float) -> str:
    text = f"{value:,.3f}"
    return f"**{text}**" if value > BUDGET_MS else text


def markdown(data: dict[str, Any]) -> str:
    s, m = data["settings"], data["machine"]
    lines = [
        f"Redis {data['redis_version']}, {m['cpus']} CPUs, Python {m['python']}, {m['date']}. "
        f"Queue: {s['in_flight']:,} in flight, {s['ready']:,} ready, {s['dead']:,} dead; "
        f"{s['rounds']} rounds. Server times from SLOWLOG (every command logged; over "
        f"{BUDGET_MS:g} ms in bold): the call's longest top-level command. Commands: "
        "top-level commands per call; redis.calls: commands its scripts ran. The last "
        "column repeats the rounds with the SLOWLOG off: EVALSHA time per call from INFO "
        'commandstats, without the cost of logging each redis.call. "Gave up": the '
        "client's I/O timeout passed before the reply (the server time is still measured).",
        "",
        "| operation | longest command | longest server ms | median server ms "
        "| commands | redis.calls | wall ms (median) | SLOWLOG off: scripts ms (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, row in data["operations"].items():
        off = row["slowlog_off"]
        control = "–" if off is None else f"{off['scripts_median_ms']:,.3f}"
        wall = f"{row['wall_median_ms']:,.3f}"
        if row["client_gave_up"]:
            wall += f" (gave up {row['client_gave_up']}×)"
        lines.append(
            f"| {label} | {row['longest_command']} | {_ms(row['longest_ms'])} | "
            f"{_ms(row['median_ms'])} | {row['commands_median']:g} | "
            f"{row['nested_calls_median']:g} | {wall} | {control} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=None, help="claimed jobs (100,000)")
    parser.add_argument("--ready", type=int, default=None, help="ready jobs (100,000)")
    parser.add_argument("--dead", type=int, default=None, help="dead letters (10,000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the default sizes: checks the script"
    )
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    settings = {
        "in_flight": 100_000 // scale if args.in_flight is None else args.in_flight,
        "ready": 100_000 // scale if args.ready is None else args.ready,
        "dead": 10_000 // scale if args.dead is None else args.dead,
        "rounds": args.rounds,
    }
    least = 2 * settings["rounds"] * (OPS + 1) + BATCH
    if settings["in_flight"] < least:
        parser.error(f"--in-flight must be at least {least:,} for {settings['rounds']} rounds")
    server = RedisServer(find_server_binary(), extra=("--slowlog-log-slower-than", "-1"))
    server.start()
    try:
        data: dict[str, Any] = {"machine": machine(), "settings": settings}
        data.update(trio.run(run, server.url, settings))
    finally:
        server.close()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "script_time.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}", flush=True)
    print(markdown(data))


if __name__ == "__main__":
    main()
