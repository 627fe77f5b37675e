"""``trioqueue worker`` against a Redis that is down: honest start-up, outage lines, giving up.

Each worker is a real subprocess on a private server of the test's own, which
the test stops and starts; the waits are for lines, never for a fixed time.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from .redis_server import RedisServer, find_server_binary
from .test_cli_redis import HERE, Target, Worker, environment, queue_name

if TYPE_CHECKING:
    from collections.abc import Iterator

OUTAGE_LINE = re.compile(
    r"WARNING trioqueue\.pool: the backend at redis://127\.0\.0\.1:\d+/0 could not be reached "
    r"since \d\d:\d\d:\d\d \((?P<cause>.+)\); next try in (?P<pause>\d+\.\d) s$"
)


@pytest.fixture
def down_server() -> Iterator[RedisServer]:
    """A private server, not started: its port is free, so connecting is refused."""
    server = RedisServer(find_server_binary())
    yield server
    server.close()


def test_a_worker_started_while_redis_is_down_says_so_and_is_ready_once_it_is_up(
    down_server: RedisServer,
):
    target = Target(down_server)
    worker = Worker(target, "cli_handlers:record", "--sweep-interval", "0.2")
    try:
        connecting = worker.wait_for(worker.err, "connecting to")[0]
        assert f"connecting to {down_server.url}" in connecting
        # two steps of the backoff: the first try, then the next after its pause
        lines = worker.wait_for(worker.err, "could not be reached", 2)
        for line in lines:
            match = OUTAGE_LINE.search(line)
            assert match is not None, line
            assert "retry this call" not in line
        assert not any("worker on" in line for line in worker.err_text), worker.err_text
        down_server.start()
        back = worker.wait_for(worker.err, "reachable again after")[0]
        assert back.split(" ")[2] == "INFO"
        ready = worker.wait_for(worker.err, "worker on reliable queue")[0]
        assert ready.endswith("ready"), ready
        assert worker.err_text.index(back) < worker.err_text.index(ready)
        target.enqueue_lines(2)
        assert sorted(worker.wait_for(worker.out, "ran", 2)) == ["ran j0", "ran j1"]
        worker.signal(signal.SIGTERM)
        assert worker.exit_status() == 0
    finally:
        worker.close()


def test_a_sigterm_stops_a_worker_that_never_reached_redis_at_once(down_server: RedisServer):
    worker = Worker(Target(down_server), "cli_handlers:record")
    try:
        worker.wait_for(worker.err, "could not be reached", 2)
        worker.signal(signal.SIGTERM)
        assert worker.exit_status() == 0
        assert not any("worker on" in line for line in worker.err_text), worker.err_text
    finally:
        worker.close()


def test_give_up_after_stops_a_worker_that_never_reaches_redis(down_server: RedisServer):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "trioqueue", "worker", "cli_handlers:record",
         "--redis", down_server.url, "--queue", queue_name(), "--give-up-after", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=HERE,
        env=environment(),
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert took < 20, result.stderr  # 2 s, and Python's start-up
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    [error] = errors
    assert "could not be reached for 2.0 s" in error
    assert "--give-up-after 2" in error
    assert "supervisor" in error
    assert "worker on" not in result.stderr
    assert "Traceback" not in result.stderr


def test_the_worker_help_shows_give_up_after_and_its_default():
    result = subprocess.run(
        [sys.executable, "-m", "trioqueue", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**environment(), "COLUMNS": "200"},
    )
    assert result.returncode == 0
    block = result.stdout.split("  --give-up-after SECONDS", 1)[1].split("\n  --", 1)[0]
    assert " ".join(block.split()).endswith("(default: never)"), result.stdout
