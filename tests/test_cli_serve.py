"""``trioqueue serve`` as a user runs it: a real process, a real socket, a signal to stop."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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
