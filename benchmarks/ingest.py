"""The HTTP ingest path: POST /jobs against a bare Hypercorn endpoint, side by side.

    python benchmarks/ingest.py [--rounds 3] [--requests 5000] [--json]

``nox -s bench`` runs this. Each round starts two servers in processes of their
own, one after the other, both Hypercorn's Trio worker: the floor, a bare ASGI
endpoint that reads the body and answers 201 without storing anything, and
``trioqueue serve`` on the memory backend (no handler: ingest alone). 50 kept-alive
connections (a small raw-socket client, in this process) post the same requests
to each; the figures are
requests per second and the latency percentiles of one request. Target: the
service at least half the floor's rate.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from functools import partial
from typing import Any

import trio

CLIENTS = 50
TARGET = 0.5


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI endpoint: read the body, answer 201 with a small JSON, store nothing."""
    if scope["type"] == "lifespan":  # nothing to start or stop, but the server asks
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    body = b'{"id":"x","deduplicated":false,"queued":true}'
    await send(
        {
            "type": "http.response.start",
            "status": 201,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_floor(port: int) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(serve, floor_app, config))
        print("ready", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(kind: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    if kind == "floor":
        command = [sys.executable, __file__, "--serve-floor", str(port)]
    else:
        command = [
            sys.executable, "-m", "trioqueue", "-q", "serve", "--bind", f"127.0.0.1:{port}",
            "--memory", "--capacity", "1000000",
        ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    said = process.stdout.readline()  # "ready", or the service's "listening on"
    if not said:
        raise RuntimeError(f"the {kind} server did not start: {command}")
    return process, f"http://127.0.0.1:{port}"


async def _exchange(stream: trio.SocketStream, request: bytes, buffer: bytearray) -> int:
    """Send one request on a kept-alive connection; read its answer; the status."""
    await stream.send_all(request)
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        buffer += chunk
    head_end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:head_end]).lower()
    length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
    while len(buffer) < head_end + length:
        buffer += await stream.receive_some(65536)
    status = int(head.split(b" ", 2)[1])
    del buffer[: head_end + length]
    return status


async def load(base: str, requests: int, prefix: str) -> dict[str, float]:
    """*requests* POSTs from `CLIENTS` kept-alive connections; rate and latency.

    A small HTTP/1.1 client on raw sockets, so that the client costs little next
    to the servers measured (httpx on Trio took more CPU per request than either).
    """
    host, port = base.removeprefix("http://").split(":")
    latencies: list[float] = []
    numbers = iter(range(requests))

    async def client() -> None:
        stream = await trio.open_tcp_stream(host, int(port))
        buffer = bytearray()
        async with stream:
            for n in numbers:
                body = json.dumps({"id": f"{prefix}{n}", "payload": {"n": n}}).encode()
                request = (
                    b"POST /jobs HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                started = time.perf_counter()
                status = await _exchange(stream, request, buffer)
                latencies.append(time.perf_counter() - started)
                if status != 201:
                    raise RuntimeError(f"{base}: answered {status}")

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CLIENTS):
            nursery.start_soon(client)
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "per_second": requests / elapsed,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[int(len(latencies) * 0.99)],
    }


def one(kind: str, requests: int, round_: int) -> dict[str, float]:
    process, base = start(kind)
    try:
        return trio.run(load, base, requests, f"r{round_}-")
    finally:
        process.terminate()
        process.wait(timeout=30)


def measure(rounds: int, requests: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {"floor": [], "trioqueue serve (memory)": []}
    for n in range(1, rounds + 1):
        floor = one("floor", requests, n)
        ours = one("memory", requests, n)
        runs["floor"].append(floor)
        runs["trioqueue serve (memory)"].append(ours)
        ratio = ours["per_second"] / floor["per_second"]
        print(
            f"round {n}: floor {floor['per_second']:,.0f} req/s, trioqueue serve "
            f"{ours['per_second']:,.0f} req/s, ratio {ratio:.2f}",
            flush=True,
        )
    ratios = [
        o["per_second"] / f["per_second"]
        for f, o in zip(runs["floor"], runs["trioqueue serve (memory)"], strict=True)
    ]
    return {
        "requests": requests,
        "clients": CLIENTS,
        "runs": runs,
        "median": {
            name: {key: statistics.median(run[key] for run in values) for key in values[0]}
            for name, values in runs.items()
        },
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "target": TARGET,
        "met": statistics.median(ratios) >= TARGET,
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-floor":
        trio.run(serve_floor, int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.rounds, args.requests)
    print(json.dumps(result, indent=2) if args.json else result["median"], flush=True)


if __name__ == "__main__":
    main()
