"""A cancellation storm: many tasks' ``RedisBackend.command`` calls cut off at random deadlines.

    python benchmarks/cancel_storm.py [--calls 20000] [--tasks 64] [--deadlines-ms 2,5,20]
                                      [--seed 0] [--cluster] [--budget 60]

On a private Redis (never the machine's shared one; ``--cluster``: a private
cluster of 3 masters and 3 replicas, ``tests/redis_cluster.py``), for each
deadline *D*: *tasks* Trio tasks share one ``RedisBackend(url, queue="{storm}")``
and send ``ECHO <task>:<n>`` (a token of its own per call), *calls* in all,
each call under ``trio.move_on_after`` a deadline drawn uniformly from
[0, *D*] ms (a ``random.Random(seed)``, drawn up front, so every run sends
the same deadlines).

Prints a Markdown table, one row per *D*: the calls that returned and their
share, the wrong replies (a reply that is not the call's own token: must be 0),
the calls that raised something other than a cancellation (how many, and the
first message), the TCP connections the server(s) accepted during the storm
(``INFO stats`` ``total_connections_received``, read on a plain socket before
and after, the reading sockets themselves not counted), whether a plain
``PING`` on the same backend answered within 10 s after the storm, and how long
the storm took. Every part of a row runs under a deadline (*budget* seconds for
the storm, 10 s for the PING, 10 s to close the backend), and a watchdog stops
the whole process if even that fails, so a client whose calls hang cannot hang
the benchmark: its row says what did not finish.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import trio
from _common import RedisServer, find_server_binary

import trioqueue

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "{storm}"
PING_WITHIN = 10.0  # seconds the backend has to answer PING after the storm
CLOSE_WITHIN = 10.0  # seconds to close the backend
WATCHDOG_SLACK = 60.0  # seconds past a row's own deadlines before the process is stopped


@attrs.define
class Row:
    """What one storm, at one deadline, came to."""

    deadline_ms: float
    calls: int
    returned: int = 0
    cancelled: int = 0
    wrong: int = 0
    first_wrong: str = ""
    errors: int = 0
    first_error: str = ""
    unfinished: int = 0  # calls not yet ended when the storm's budget ran out
    connections: int = -1
    answers_after: bool = False
    after_detail: str = ""
    seconds: float = 0.0


def info_stat(port: int, field: str) -> int:
    """One integer field of ``INFO stats`` of the server on *port*, on a plain socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")
        reply = b""
        while b"\r\n" not in reply:
            reply += _recv(sock)
        head, _, body = reply.partition(b"\r\n")
        if not head.startswith(b"$"):
            raise RuntimeError(f"INFO stats on port {port}: {reply[:100]!r}")
        size = int(head[1:])
        while len(body) < size:
            body += _recv(sock)
    for line in body.decode(errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value)
    raise RuntimeError(f"INFO stats on port {port} has no {field}")


def _recv(sock: socket.socket) -> bytes:
    chunk = sock.recv(65_536)
    if not chunk:
        raise RuntimeError("the server closed the INFO connection")
    return chunk


def accepted(ports: list[int]) -> int:
    """Connections the servers on *ports* have accepted so far, this reading's own included."""
    return sum(info_stat(port, "total_connections_received") for port in ports)


def deadlines(seed: int, deadline_ms: float, calls: int, tasks: int) -> list[list[float]]:
    """Each task's deadlines in seconds, uniform in [0, *deadline_ms*] ms, drawn up front."""
    rng = random.Random(seed)
    return [
        [rng.uniform(0, deadline_ms) / 1000 for _ in range(calls // tasks + (i < calls % tasks))]
        for i in range(tasks)
    ]


def _text(reply: Any) -> str:
    if isinstance(reply, bytes):
        return reply.decode(errors="replace")
    return str(reply)


async def storm(
    url: str, ports: list[int], deadline_ms: float, calls: int, tasks: int, seed: int, budget: float
) -> Row:
    """One row: the storm at *deadline_ms* on one fresh backend, then a PING on it."""
    row = Row(deadline_ms=deadline_ms, calls=calls)
    plan = deadlines(seed, deadline_ms, calls, tasks)
    with trio.move_on_after(budget + PING_WITHIN + CLOSE_WITHIN + 30) as whole:
        async with trioqueue.RedisBackend(url, queue=QUEUE) as backend:
            with trio.move_on_after(PING_WITHIN):
                await backend.command("PING")  # connected before the count starts
            before = await trio.to_thread.run_sync(accepted, ports)
            ended = 0

            async def task(index: int, waits: list[float]) -> None:
                nonlocal ended
                for n, wait in enumerate(waits):
                    token = f"{index}:{n}"
                    try:
                        with trio.move_on_after(wait) as scope:
                            reply = await backend.command("ECHO", token)
                    except Exception as exc:  # counted, the first one shown
                        row.errors += 1
                        row.first_error = row.first_error or f"{type(exc).__name__}: {exc}"
                    else:
                        if scope.cancelled_caught:
                            row.cancelled += 1
                        elif _text(reply) == token:
                            row.returned += 1
                        else:
                            row.returned += 1
                            row.wrong += 1
                            row.first_wrong = row.first_wrong or f"{token!r} got {reply!r}"
                    ended += 1

            start = time.perf_counter()
            with trio.move_on_after(budget):
                async with trio.open_nursery() as nursery:
                    for index, waits in enumerate(plan):
                        nursery.start_soon(task, index, waits)
            row.seconds = time.perf_counter() - start
            row.unfinished = calls - ended
            after = await trio.to_thread.run_sync(accepted, ports)
            row.connections = after - before - len(ports)  # less the later reading's own
            with trio.move_on_after(PING_WITHIN) as pinging:
                try:
                    reply = await backend.command("PING")
                except Exception as exc:  # reported
                    row.after_detail = f"{type(exc).__name__}: {exc}"
                else:
                    row.answers_after = _text(reply) == "PONG"
                    row.after_detail = "" if row.answers_after else f"PING got {reply!r}"
            if pinging.cancelled_caught:
                row.after_detail = f"no reply to PING within {PING_WITHIN:g} s"
            # the backend's close, at the end of the async with, gets CLOSE_WITHIN
            whole.deadline = min(whole.deadline, trio.current_time() + CLOSE_WITHIN)
    if whole.cancelled_caught:
        row.after_detail += "; the row (or the backend's close) ran out of time"
    return row


def watchdog(seconds: float, servers: list[RedisServer]) -> threading.Timer:
    """A timer that stops the servers and the process if a row runs past *seconds*."""

    def fire() -> None:
        print(f"\nno result within {seconds:g} s: stopping (a call that cannot be cancelled)")
        for server in servers:
            server.close()
        sys.stdout.flush()
        os._exit(2)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def markdown(rows: list[Row]) -> str:
    lines = [
        "| D (ms) | returned | returned (%) | wrong replies | other exceptions "
        "| new TCP connections | answers after | storm (s) |",
        "|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    for row in rows:
        errors = f"{row.errors}" + (f" ({row.first_error})" if row.errors else "")
        wrong = f"{row.wrong}" + (f" ({row.first_wrong})" if row.wrong else "")
        unfinished = f", {row.unfinished} unfinished" if row.unfinished else ""
        lines.append(
            f"| {row.deadline_ms:g} | {row.returned}{unfinished} "
            f"| {100 * row.returned / row.calls:.1f} | {wrong} | {errors} "
            f"| {row.connections} | {'yes' if row.answers_after else 'no'} "
            f"| {row.seconds:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls in all, per deadline")
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--deadlines-ms", default="2,5,20", help="D: deadlines are in [0, D] ms")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster", action="store_true", help="a private Redis Cluster")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per storm at most")
    args = parser.parse_args()
    values = [float(d) for d in args.deadlines_ms.split(",")]
    print(f"trioqueue from {Path(trioqueue.__file__).parent}", flush=True)
    if args.cluster:
        sys.path.append(str(ROOT))  # after trioqueue's own: the package imported above stays
        from tests.redis_cluster import RedisCluster

        cluster = RedisCluster(find_server_binary())
        servers, url = cluster.nodes, cluster.url + "?cluster=yes"
        start = cluster.start
    else:
        server = RedisServer(find_server_binary())
        servers, url, start = [server], server.url, server.start
    rows = []
    try:
        start()
        ports = [server.port for server in servers]
        print(f"{'cluster' if args.cluster else 'server'} at {url}", flush=True)
        for deadline_ms in values:
            timer = watchdog(args.budget + PING_WITHIN + CLOSE_WITHIN + WATCHDOG_SLACK, servers)
            row = trio.run(
                storm, url, ports, deadline_ms, args.calls, args.tasks, args.seed, args.budget
            )
            timer.cancel()
            rows.append(row)
            detail = f" ({row.after_detail.lstrip('; ')})" if row.after_detail else ""
            print(
                f"D {deadline_ms:g} ms: {row.returned} returned, {row.cancelled} cancelled, "
                f"{row.errors} raised, {row.unfinished} unfinished, "
                f"{row.connections} connections, in {row.seconds:.1f} s{detail}",
                flush=True,
            )
    finally:
        for server in servers:
            server.close()
    print(
        f"\n{args.calls} calls of ECHO from {args.tasks} tasks on one backend, "
        f"seed {args.seed}, {'a 3+3 cluster' if args.cluster else 'one server'}:\n"
    )
    print(markdown(rows))


if __name__ == "__main__":
    main()
