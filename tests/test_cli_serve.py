"""``trioqueue serve`` as a user runs it: a real process, a real socket, a signal to stop."""

from __future__ import annotations

import collections
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import httpx
import trio

import trioqueue

from .http_server import UNREAD_BODY

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    """``trioqueue serve ARGS`` on a free port; the process and its base URL, once listening."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "trioqueue", "serve", "--bind", f"127.0.0.1:{port}", *args],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("trioqueue serve: listening on http://127.0.0.1:"), line
    return process, f"http://127.0.0.1:{port}"


def post(base: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        base + "/jobs", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def get(base: str, path: str) -> dict[str, object]:
    with urllib.request.urlopen(base + path, timeout=10) as reply:
        return json.loads(reply.read())


def test_serve_with_a_handler_runs_the_posted_jobs_and_stops_on_sigterm():
    process, base = start("--handler", "cli_handlers:record", "--grace", "5")
    try:
        for n in range(5):
            assert post(base, {"id": f"e{n}", "payload": {"n": n}})[0] == 201
        assert post(base, {"id": "e0", "payload": {"n": 0}})[0] == 200
        assert post(base, {"id": "e0", "payload": {"n": 9}})[0] == 409
        deadline = time.monotonic() + 20
        while get(base, "/stats")["succeeded"] != 5:
            assert time.monotonic() < deadline, "the posted jobs did not all run"
            time.sleep(0.05)
        assert get(base, "/jobs/e3")["state"] == "completed"
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert sorted(line for line in out.splitlines() if line.startswith("ran ")) == [
        f"ran e{n}" for n in range(5)
    ]


def test_serve_without_a_redis_url_never_reads_one_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRIOQUEUE_REDIS_URL", "redis://127.0.0.1:1")
    process, base = start()
    try:
        assert get(base, "/readyz") == {"ready": True}  # in memory: nothing to reach
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 0


def test_in_memory_without_a_handler_it_warns_and_a_stop_with_jobs_left_exits_3():
    """Nothing in this process runs the jobs: the service says so, and counts the loss."""
    process, base = start()
    try:
        assert post(base, {"id": "e1", "payload": {}})[0] == 201
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 3, err
    assert "no --handler: nothing in this process runs the jobs it accepts" in err
    assert "1 accepted jobs were never run" in err


@UNREAD_BODY
async def test_sigterm_under_load_on_redis_loses_no_accepted_job(redis_server):
    """20 clients post while the service's pool runs slow jobs; SIGTERM comes mid-load.
    Every job answered 201 or 202 is completed or back on the Redis queue."""
    queue = "{serve-" + str(free_port()) + "}"
    process, base = start(
        "--redis", redis_server.url, "--queue", queue, "--handler", "cli_handlers:brief",
        "--grace", "0.2",
    )  # fmt: skip
    accepted: set[str] = set()
    enough = trio.Event()  # 200 accepted: the time for SIGTERM
    counter = iter(range(1_000_000))
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:

            async def client() -> None:
                while True:
                    job_id = f"j{next(counter)}"
                    try:
                        reply = await http.post("/jobs", json={"id": job_id, "payload": 1})
                    except httpx.TransportError:
                        return  # the service closed the connection
                    if reply.status_code == 503:
                        assert reply.json()["error"] == "stopping"
                        return  # the service is shutting down: it stored nothing
                    if reply.status_code in (201, 202):
                        accepted.add(job_id)
                        if len(accepted) >= 200:
                            enough.set()

            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(client)
                await enough.wait()
                process.send_signal(signal.SIGTERM)
    finally:
        _, err = await trio.to_thread.run_sync(lambda: process.communicate(timeout=60))
    assert process.returncode in (0, 3), err  # 3: handlers were cut short, jobs put back
    async with trioqueue.RedisBackend(redis_server.url, queue=queue) as backend:
        records = {job_id: await backend.status(job_id) for job_id in accepted}
        assert all(record is not None for record in records.values())
        states = collections.Counter(r.state for r in records.values() if r is not None)
        done = states[trioqueue.JobState.COMPLETED]
        waiting = states[trioqueue.JobState.RECEIVED] + states[trioqueue.JobState.FAILED_RETRY]
        assert done + waiting == len(accepted), states  # none in flight, none lost
        stats = await backend.stats()
        assert stats.gauges.inflight == 0
        assert await backend.pending() == waiting  # back on the queue, not held
