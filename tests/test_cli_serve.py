"""``trioqueue serve`` as a user runs it: a real process, a real socket, a signal to stop."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import httpx
import pytest
import trio

import trioqueue

from .http_server import UNREAD_BODY

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    *args: str, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``trioqueue serve ARGS`` on *host* and a free port; the process and a URL to reach it.

    Once it listens: the URL is on 127.0.0.1, which reaches a wildcard *host* too.
    """
    port = free_port()
    if env is None:  # the Redis and queue a developer exported are not the test's
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRIOQUEUE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "trioqueue", "serve", "--bind", f"{host}:{port}", *args],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(f"trioqueue serve: listening on http://{host}:"), (
        line + process.stderr.read() if process.poll() is not None else line
    )
    return process, f"http://127.0.0.1:{port}"


def post(
    base: str, body: dict[str, object], token: str | None = None
) -> tuple[int, dict[str, object]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        base + "/jobs", data=json.dumps(body).encode(), headers=headers
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


def test_serve_shows_a_failed_jobs_traceback_only_when_told_tracebacks():
    for args, shown in (((), False), (("--tracebacks",), True)):
        command = ("--handler", "cli_handlers:failing", "--max-attempts", "1", *args)
        process, base = start(*command)
        try:
            assert post(base, {"id": "f", "payload": {}})[0] == 201
            deadline = time.monotonic() + 20
            while get(base, "/jobs/f")["state"] != "failed":
                assert time.monotonic() < deadline, "the job did not fail"
                time.sleep(0.05)
            error = get(base, "/jobs/f")["last_error"]
            assert isinstance(error, dict)
            assert error["type"] == "RuntimeError"
            assert ("traceback" in error) is shown, args
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)


def test_serve_refuses_a_bind_other_hosts_reach_unless_it_has_a_token_or_is_told_insecure():
    refused = subprocess.run(
        [sys.executable, "-m", "trioqueue", "serve", "--bind", f"0.0.0.0:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("trioqueue serve: --bind 0.0.0.0:")
    for fix in (
        "--ingest-token",
        "--admin-token",
        "TRIOQUEUE_INGEST_TOKEN",
        "TRIOQUEUE_ADMIN_TOKEN",
        "127.0.0.1",
        "--insecure",
    ):
        assert fix in line

    admin = {**os.environ, "TRIOQUEUE_ADMIN_TOKEN": "s3cret"}
    # (arguments, environment, the token sending takes, whether an anonymous send and read pass)
    for args, env, token, anonymous in (
        (("--insecure",), None, None, True),
        ((), admin, "s3cret", False),
        (("--ingest-token", "in-token"), None, "in-token", False),
    ):
        process, base = start("--memory", *args, host="0.0.0.0", env=env)
        try:
            anonymous_send = post(base, {"id": "e0", "payload": 0})[0]
            assert anonymous_send == (201 if anonymous else 401)
            assert post(base, {"id": "e1", "payload": {"secret": 1}}, token)[0] == 201
            try:
                status = urllib.request.urlopen(base + "/jobs/e1", timeout=10).status
            except urllib.error.HTTPError as exc:
                status = exc.code
            assert status == (200 if anonymous else 401)
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)


def test_serve_answers_to_its_own_names_and_refuses_others():
    process, base = start("--memory", "--allowed-host", "jobs.example")
    try:
        for host, status in (
            ("jobs.example", 200),
            ("localhost:8000", 200),
            (socket.gethostname(), 200),
            ("127.0.0.1", 200),
            ("rebound.example", 400),
        ):
            asked = urllib.request.Request(base + "/stats", headers={"Host": host})
            try:
                got = urllib.request.urlopen(asked, timeout=10).status
            except urllib.error.HTTPError as exc:
                got = exc.code
            assert got == status, host
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


async def test_serve_takes_the_redis_url_and_queue_from_the_environment(redis_server):
    """As every other command does: exported for the tutorial's commands, they are
    what serve stores its jobs in, not a memory backend that loses them."""
    queue = "{web-" + os.urandom(4).hex() + "}"
    env = {**os.environ, "TRIOQUEUE_REDIS_URL": redis_server.url, "TRIOQUEUE_QUEUE": queue}
    process, base = start(env=env)
    try:
        assert post(base, {"id": "e1", "payload": {"to": "a"}})[0] == 201
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    async with trioqueue.RedisBackend(redis_server.url, queue=queue) as backend:
        record = await backend.status("e1")
    assert record is not None, "serve did not store the job in the queue the variables name"
    assert record.state is trioqueue.JobState.RECEIVED


def _refused(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``trioqueue serve ARGS``, which is expected to refuse to start."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRIOQUEUE_")}
    return subprocess.run(
        [sys.executable, "-m", "trioqueue", "serve", "--bind", f"127.0.0.1:{free_port()}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**clean, **(env or {})},
        cwd=HERE,
    )


def test_in_memory_without_a_handler_it_refuses_to_start_unless_told_memory():
    """Nothing would run the jobs, and they would die with the process: a 201 must
    not mean that unless the user asked for it."""
    refused = _refused()
    assert refused.returncode == 2, refused.stderr
    assert refused.stdout == ""  # it never listened
    said = refused.stderr
    assert "nothing in this process would run the jobs" in said
    assert "lost when it stops" in said
    for way in ("--redis", "TRIOQUEUE_REDIS_URL", "--handler", "--memory"):
        assert way in said, said
    process, base = start("--memory")
    try:
        assert post(base, {"id": "e1", "payload": {}})[0] == 201
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


def test_memory_is_memory_whatever_the_environment_names_and_not_beside_redis():
    process, base = start(
        "--memory", env={**os.environ, "TRIOQUEUE_REDIS_URL": "redis://127.0.0.1:1"}
    )
    try:
        assert get(base, "/readyz") == {"ready": True}  # in memory: nothing to reach
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 0
    both = _refused("--memory", "--redis", "redis://127.0.0.1:1", "--queue", "{q}")
    assert both.returncode == 2
    assert "--memory" in both.stderr
    assert "--redis" in both.stderr


def test_in_memory_without_a_handler_it_warns_and_a_stop_with_jobs_left_exits_3():
    """Nothing in this process runs the jobs: the service says so, and counts the loss."""
    process, base = start("--memory")
    try:
        assert post(base, {"id": "e1", "payload": {}})[0] == 201
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 3, err
    assert "no --handler: nothing in this process runs the jobs it accepts" in err
    assert "1 accepted jobs were never run" in err


def test_in_memory_the_jobs_held_are_bounded_and_past_the_bound_it_answers_503():
    """No handler, a client that never stops: the backlog stops at --max-memory."""
    process, base = start("--memory", "--max-memory", "1", "--capacity", "2")
    payload = {"blob": "x" * 200_000}  # five of them fill 1 MiB
    try:
        statuses = [post(base, {"id": f"big-{n}", "payload": payload})[0] for n in range(8)]
        assert statuses[:2] == [201, 201]  # the ready queue's capacity
        assert set(statuses[2:4]) == {202}  # stored beyond it, within the memory
        assert statuses[-1] == 503
        asked = urllib.request.Request(
            base + "/jobs",
            data=json.dumps({"id": "one-more", "payload": payload}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(asked, timeout=10)
        body = json.loads(refused.value.read())
        assert (refused.value.code, refused.value.headers["Retry-After"]) == (503, "1")
        assert body["error"] == "full"
        assert "--max-memory" in body["message"]
        assert "enqueue()" not in body["message"]  # the service's words, not the library's
        huge = {"id": "huge", "payload": {"blob": "x" * 1_048_000}}  # with its record: > 1 MiB
        status, body = post(base, huge)
        assert (status, body["error"]) == (413, "too_large"), body
        assert "can never be stored" in str(body["message"])
        held = statuses.count(201) + statuses.count(202)
        assert 4 <= held <= 5
        stats = get(base, "/stats")
        assert stats["enqueued"] == held  # nothing refused was stored
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_hypercorns_start_line_shows_once_and_not_with_quiet():
    for quiet, times in (((), 1), (("-q",), 0)):
        process, _ = start("--memory", *quiet)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert err.count("Running on") == times, err


def test_serve_on_a_redis_that_is_down_says_so_at_start_and_serves_503s():
    process, base = start("--redis", f"redis://127.0.0.1:{free_port()}/0", "--queue", "{q}")
    try:
        status, body = post(base, {"id": "e1", "payload": {}})
        assert (status, body["error"]) == (503, "unavailable")
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    start_line = next(line for line in err.splitlines() if "POST /jobs answers 503" in line)
    assert "WARNING" in start_line
    assert "cannot take jobs now (all attempts to connect" in start_line
    answered = next(line for line in err.splitlines() if "answered 503" in line)
    assert "Worker pools retry" not in answered  # advice for library users, not here


def test_stopping_in_memory_says_what_it_waits_for_and_what_is_lost():
    process, base = start("--handler", "cli_handlers:failing", "--grace", "1")
    try:
        assert post(base, {"id": "f", "payload": {}})[0] == 201
        deadline = time.monotonic() + 20
        while get(base, "/stats")["gauges"]["retry_waiting"] != 1:  # type: ignore[index]
            assert time.monotonic() < deadline, "the job did not wait to retry"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 3, err
    # the job failed and waits out its backoff, or has just begun its next attempt
    left = re.search(
        r"waiting up to --grace 1 s for the jobs left: (\d+) running, (\d+) waiting to "
        r"retry, (\d+) waiting for a worker, (\d+) due later",
        err,
    )
    assert left is not None, err
    assert sum(int(n) for n in left.groups()) == 1
    assert "they are lost, those put back included" in err


def test_max_memory_is_for_a_queue_in_memory_only():
    command = ["serve", "--max-memory", "64", "--redis", "redis://127.0.0.1:1", "--queue", "q"]
    refused = subprocess.run(
        [sys.executable, "-m", "trioqueue", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2, refused.stderr
    assert "maxmemory" in refused.stderr


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
