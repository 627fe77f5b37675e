"""The Redis clients a backend can use, side by side on one private Redis, from Trio.

    python benchmarks/clients.py [--calls 5000] [--rounds 3]

For each client (TRIOQUEUE_REDIS_CLIENT: hiredis, glide, coredis), through
``RedisBackend.command``, as a handler's call goes: the time of one ``SET``
round trip (calls one after another) and the ``SET`` calls per second from 32
tasks at once; then a single ``Queue.enqueue`` per call. Each round measures
every client in turn, a different one first each round; ratios are taken
within a round (absolute times drift on a shared machine). A blocking socket's
round trip (no Trio) is printed as the floor.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from urllib.parse import urlsplit

import trio
from _common import RedisServer, find_server_binary

import trioqueue

CLIENTS = ("hiredis", "glide", "coredis")
TASKS = 32


async def measure(url: str, calls: int) -> dict[str, float]:
    """Microseconds per sequential SET and per enqueue, and SETs/s from TASKS tasks."""
    async with trioqueue.RedisBackend(url, queue="{clients}", capacity=10**7) as backend:
        await backend.command("PING")  # connected, and the scripts loaded below
        queue = trioqueue.Queue(backend)
        await queue.enqueue(0)
        start = time.perf_counter()
        for i in range(calls):
            await backend.command("SET", f"k{i}", i)
        sequential = (time.perf_counter() - start) / calls * 1e6

        async def task(first: int) -> None:
            for i in range(first, calls, TASKS):
                await backend.command("SET", f"k{i}", i)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for first in range(TASKS):
                nursery.start_soon(task, first)
        concurrent = calls / (time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(calls):
            await queue.enqueue({"i": i})
        enqueue = (time.perf_counter() - start) / calls * 1e6
    return {"set_us": sequential, "sets_per_s_32": concurrent, "enqueue_us": enqueue}


def socket_floor(url: str, calls: int) -> float:
    """Microseconds per PING on a blocking socket: the machine's round trip."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        for _ in range(calls):
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            sock.recv(64)
        return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    got: dict[str, list[dict[str, float]]] = {name: [] for name in CLIENTS}
    floors = []
    try:
        for n in range(args.rounds):
            floors.append(socket_floor(server.url, args.calls))
            order = CLIENTS[n % len(CLIENTS) :] + CLIENTS[: n % len(CLIENTS)]
            for name in order:
                os.environ["TRIOQUEUE_REDIS_CLIENT"] = name
                got[name].append(trio.run(measure, server.url, args.calls))
            line = ", ".join(
                f"{name} {got[name][-1]['set_us']:.0f} us/SET, "
                f"{got[name][-1]['sets_per_s_32']:,.0f} SET/s from {TASKS} tasks, "
                f"{got[name][-1]['enqueue_us']:.0f} us/enqueue"
                for name in CLIENTS
            )
            print(f"round {n + 1}: blocking socket {floors[-1]:.0f} us/PING; {line}", flush=True)
    finally:
        server.close()
    print(f"\nmedians over {args.rounds} rounds; ratios per round, hiredis over the other:")
    print(f"- blocking socket (no Trio): {statistics.median(floors):.0f} us per PING")
    for name in CLIENTS:
        runs = got[name]
        print(
            f"- {name}: {statistics.median(r['set_us'] for r in runs):.0f} us per SET, "
            f"{statistics.median(r['sets_per_s_32'] for r in runs):,.0f} SET/s from {TASKS} "
            f"tasks, {statistics.median(r['enqueue_us'] for r in runs):.0f} us per enqueue"
        )
    for other in CLIENTS[1:]:
        pairs = list(zip(got["hiredis"], got[other], strict=True))
        trip = [round(o["set_us"] / h["set_us"], 2) for h, o in pairs]
        many = [round(h["sets_per_s_32"] / o["sets_per_s_32"], 2) for h, o in pairs]
        enqueue = [round(o["enqueue_us"] / h["enqueue_us"], 2) for h, o in pairs]
        print(
            f"- hiredis against {other}: a SET round trip {trip}x as fast, SET/s from {TASKS} "
            f"tasks {many}x, an enqueue {enqueue}x as fast"
        )


if __name__ == "__main__":
    main()
