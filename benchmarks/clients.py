"""trioqueue's own Redis transport beside the other clients that run on Trio, one private Redis.

    python benchmarks/clients.py [--calls 5000] [--rounds 3]

Why the project keeps its own small client: for each client, the time of one
``SET`` round trip (calls one after another) and the ``SET`` calls per second
from 32 tasks at once, as handlers make them. trioqueue's is measured through
``RedisBackend.command`` (what a handler calls, via ``current_redis()``);
coredis (pure Python on anyio) and, where installed, valkey-glide (a Rust core
behind anyio) through their own ``set``. Each round measures every client in
turn, a different one first each round; ratios are taken within a round
(absolute times drift on a shared machine). A blocking socket's round trip (no
Trio) is printed as the floor.
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import statistics
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio
from _common import RedisServer, find_server_binary

import trioqueue

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

TASKS = 32


async def timed(send_set: Callable[[str, int], Awaitable[Any]], calls: int) -> dict[str, float]:
    """Microseconds per sequential SET, and SETs/s from TASKS tasks, through *send_set*."""
    await send_set("warm", 0)
    start = time.perf_counter()
    for i in range(calls):
        await send_set(f"k{i}", i)
    sequential = (time.perf_counter() - start) / calls * 1e6

    async def task(first: int) -> None:
        for i in range(first, calls, TASKS):
            await send_set(f"k{i}", i)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for first in range(TASKS):
            nursery.start_soon(task, first)
    return {"set_us": sequential, "sets_per_s": calls / (time.perf_counter() - start)}


async def trioqueue_client(url: str, calls: int) -> dict[str, float]:
    async with trioqueue.RedisBackend(url, queue="{clients}") as backend:
        return await timed(lambda key, value: backend.command("SET", key, value), calls)


async def coredis_client(url: str, calls: int) -> dict[str, float]:
    import coredis

    async with coredis.Redis.from_url(url) as client:
        return await timed(lambda key, value: client.set(key, str(value)), calls)


async def glide_client(url: str, calls: int) -> dict[str, float]:
    import glide

    glide.Logger.set_logger_config(glide.LogLevel.OFF)  # it logs to standard output
    parts = urlsplit(url)
    client = await glide.GlideClient.create(
        glide.GlideClientConfiguration(
            [glide.NodeAddress(parts.hostname or "127.0.0.1", parts.port or 6379)],
            request_timeout=10_000,
        )
    )
    try:
        return await timed(lambda key, value: client.set(key, str(value)), calls)
    finally:
        await client.close()


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
    clients = {"trioqueue": trioqueue_client, "coredis": coredis_client}
    if importlib.util.find_spec("glide") is not None:
        clients["valkey-glide"] = glide_client
    else:
        print("valkey-glide is not installed (pip install valkey-glide to compare it too)")
    names = list(clients)
    server = RedisServer(find_server_binary())
    server.start()
    got: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    floors = []
    try:
        for n in range(args.rounds):
            floors.append(socket_floor(server.url, args.calls))
            for name in names[n % len(names) :] + names[: n % len(names)]:
                got[name].append(trio.run(clients[name], server.url, args.calls))
            line = ", ".join(
                f"{name} {got[name][-1]['set_us']:.0f} us/SET, "
                f"{got[name][-1]['sets_per_s']:,.0f} SET/s from {TASKS} tasks"
                for name in names
            )
            print(f"round {n + 1}: blocking socket {floors[-1]:.0f} us/PING; {line}", flush=True)
    finally:
        server.close()
    print(f"\nmedians over {args.rounds} rounds; ratios per round, trioqueue's over the other:")
    print(f"- blocking socket (no Trio): {statistics.median(floors):.0f} us per PING")
    for name in names:
        runs = got[name]
        print(
            f"- {name}: {statistics.median(r['set_us'] for r in runs):.0f} us per SET, "
            f"{statistics.median(r['sets_per_s'] for r in runs):,.0f} SET/s from {TASKS} tasks"
        )
    for other in names[1:]:
        pairs = list(zip(got["trioqueue"], got[other], strict=True))
        trip = [round(o["set_us"] / t["set_us"], 2) for t, o in pairs]
        many = [round(t["sets_per_s"] / o["sets_per_s"], 2) for t, o in pairs]
        print(
            f"- trioqueue against {other}: a SET round trip {trip}x as fast, "
            f"SET/s from {TASKS} tasks {many}x"
        )


if __name__ == "__main__":
    main()
