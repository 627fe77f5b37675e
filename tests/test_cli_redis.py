"""The Redis commands of ``trioqueue``, run as subprocesses against a private server.

The worker is stopped with real signals; what happened to the jobs is read back
from Redis with ``trioqueue stats --json``, as an operator would. The tests' own
set-up and read-back (`Target.enqueue_lines`, `Target.stats`) run the same
command line in this process: a new interpreter costs a second of CPU, and the
suite runs hundreds of them; every command a test is about runs as a subprocess.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import itertools
import json
import os
import queue as stdlib_queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest.mock
import urllib.request
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import coredis
import pytest
import trio

import trioqueue
from trioqueue._cli._main import main as cli_main

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from .redis_server import RedisServer

HERE = Path(__file__).parent
TIMEOUT = 60


def queue_name() -> str:
    return "{cli-" + uuid.uuid4().hex[:10] + "}"


def cli(
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path = HERE,
) -> subprocess.CompletedProcess[str]:
    """Run ``trioqueue`` with *args*; *env* adds to the environment, without its Redis URL."""
    return subprocess.run(
        [sys.executable, "-m", "trioqueue", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=cwd,
        env=environment(env),
    )


def cli_here(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``trioqueue`` with *args* in this process, as `cli` runs it in a new one."""
    out, err = io.StringIO(), io.StringIO()
    lines = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        unittest.mock.patch.object(sys, "stdin", lines),
    ):
        status = cli_main(list(args))
    return subprocess.CompletedProcess(["trioqueue", *args], status, out.getvalue(), err.getvalue())


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment, plus *extra*, without a ``TRIOQUEUE_REDIS_URL`` of its own."""
    env = {k: v for k, v in os.environ.items() if k != "TRIOQUEUE_REDIS_URL"}
    return {**env, **(extra or {})}


class Target:
    """One queue on the private server, and the commands that name it."""

    options: tuple[str, ...] = ()
    """What every command adds to name the queue, besides ``--redis`` and ``--queue``."""

    def __init__(self, server: RedisServer) -> None:
        self.url = server.url
        self.queue = queue_name()

    def naming(self) -> list[str]:
        return ["--redis", self.url, "--queue", self.queue, *self.options]

    def run(
        self, command: str, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return cli(command, *args, *self.naming(), stdin=stdin)

    def run_here(
        self, command: str, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`run`, in this process: for a test's set-up and read-back."""
        return cli_here(command, *args, *self.naming(), stdin=stdin)

    def stats(self) -> dict[str, Any]:
        result = self.run_here("stats", "--json", "--interval", "0.05")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def wait_for_dead_letters(self, count: int) -> None:
        """Poll ``stats`` until the queue holds *count* dead letters (a worker runs apart)."""
        deadline = time.monotonic() + TIMEOUT
        while self.stats()["dead"] < count:
            assert time.monotonic() < deadline, f"fewer than {count} dead letters"
            time.sleep(0.05)

    def assert_untouched(self) -> None:
        """Nothing was ever written to the queue: ``stats`` finds no such queue."""
        result = self.run_here("stats", "--interval", "0.05")
        assert result.returncode == 1, result.stdout
        assert "does not exist yet" in result.stderr

    def enqueue_lines(self, count: int) -> None:
        lines = "".join(json.dumps({"n": n, "id": f"j{n}"}) + "\n" for n in range(count))
        result = self.run_here("enqueue", "--id-key", "id", stdin=lines)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"accepted {count}, deduplicated 0, conflicts 0"


class Worker:
    """A ``trioqueue worker`` subprocess whose output lines are read as they come."""

    def __init__(
        self,
        target: Target,
        handler: str,
        *options: str,
        env: dict[str, str] | None = None,
        cwd: Path = HERE,
        program: Sequence[str] = (sys.executable, "-m", "trioqueue"),
    ) -> None:
        """Run *handler* on *target*'s queue: ``--redis`` names it unless *env* has the URL."""
        url = [] if env and "TRIOQUEUE_REDIS_URL" in env else ["--redis", target.url]
        command = [*program, "worker", handler, *url, "--queue", target.queue, *options]
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: stdlib_queue.Queue[str] = stdlib_queue.Queue()
        self.err: stdlib_queue.Queue[str] = stdlib_queue.Queue()
        self.err_text: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(stream, lines), daemon=True)
            for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, lines: stdlib_queue.Queue[str]) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))

    def wait_for(self, lines: stdlib_queue.Queue[str], prefix: str, count: int = 1) -> list[str]:
        """The next *count* lines with *prefix*; fails at once if the worker exits first."""
        found: list[str] = []
        deadline = time.monotonic() + TIMEOUT
        while len(found) < count:
            try:
                line = lines.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            except stdlib_queue.Empty:
                if time.monotonic() >= deadline:
                    raise
                if self.process.poll() is not None and not any(p.is_alive() for p in self.pumps):
                    while not self.err.empty():
                        self.err_text.append(self.err.get_nowait())
                    tail = "\n".join(self.err_text[-5:])
                    raise AssertionError(
                        f"the worker exited ({self.process.returncode}) before {count} lines "
                        f"with {prefix!r}; it wrote:\n{tail}"
                    ) from None
                continue
            if lines is self.err:
                self.err_text.append(line)
            if line.startswith(prefix) or (lines is self.err and prefix in line):
                found.append(line)
        return found

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def exit_status(self) -> int:
        return self.process.wait(timeout=TIMEOUT)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pump in self.pumps:
            pump.join()  # the pipes are at their end once the process is gone
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def target(redis_server: RedisServer) -> Target:
    return Target(redis_server)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def held(stats: dict[str, Any]) -> dict[str, int]:
    return {key: stats[key] for key in ("ready", "stored", "processing", "claims")}


# --- worker ---------------------------------------------------------------------------


def test_a_worker_runs_the_jobs_and_a_sigterm_stops_it_cleanly(target, workers):
    target.enqueue_lines(5)
    worker = Worker(target, "cli_handlers:record")
    workers.append(worker)
    ran = worker.wait_for(worker.out, "ran", 5)
    assert sorted(ran) == sorted(f"ran j{n}" for n in range(5))
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0
    stats = target.stats()
    assert stats["counters"]["succeeded"] == 5
    assert held(stats) == {"ready": 0, "stored": 0, "processing": 0, "claims": 0}


def test_the_worker_takes_the_retry_policy_and_a_handler_timeout(target, workers):
    target.enqueue_lines(1)
    options = ("--max-attempts", "3", "--base-delay", "0", "--max-delay", "0")
    worker = Worker(target, "cli_handlers:failing", *options)
    workers.append(worker)
    assert worker.wait_for(worker.out, "failing", 3) == ["failing j0"] * 3  # no backoff wait
    target.wait_for_dead_letters(1)
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0
    [dead] = [json.loads(line) for line in target.run("dead", "list", "--json").stdout.splitlines()]
    assert dead["attempts"] == 3

    assert target.run("dead", "purge", "--all").returncode == 0
    target.enqueue_lines(1)  # j0 again, a fresh job now that its dead letter is gone
    slow = Worker(target, "cli_handlers:slow", "--max-attempts", "1", "--handler-timeout", "0.3")
    workers.append(slow)
    slow.wait_for(slow.out, "started", 1)
    target.wait_for_dead_letters(1)
    slow.signal(signal.SIGTERM)
    assert slow.exit_status() == 0
    shown = json.loads(target.run("dead", "show", "j0").stdout)
    assert "handler_timeout=0.3s" in shown["last_error"]["message"]


def test_a_retry_cap_below_its_base_is_refused_in_one_line(target):
    result = cli(
        "worker", "cli_handlers:record", "--redis", target.url, "--queue", target.queue,
        "--base-delay", "2", "--max-delay", "1",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "trioqueue worker: --max-delay 1.0 is below --base-delay 2.0: raise --max-delay or "
        "lower --base-delay"
    )


def test_sigterm_lets_running_handlers_finish_within_the_grace(target, workers):
    target.enqueue_lines(2)
    worker = Worker(target, "cli_handlers:brief", "--workers", "2", "--grace", "30")
    workers.append(worker)
    worker.wait_for(worker.out, "started", 2)
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0  # clean: both finished within the grace
    assert sorted(worker.wait_for(worker.out, "ran", 2)) == ["ran j0", "ran j1"]
    assert target.stats()["counters"]["succeeded"] == 2


def test_sigterm_after_the_grace_cancels_and_puts_every_job_back(target, workers):
    target.enqueue_lines(6)
    worker = Worker(
        target, "cli_handlers:slow", "--workers", "2", "--prefetch", "2", "--grace", "0.5"
    )
    workers.append(worker)
    worker.wait_for(worker.out, "started", 2)
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 3  # handlers were cancelled
    stats = target.stats()
    assert held(stats) == {"ready": 6, "stored": 0, "processing": 0, "claims": 0}
    assert stats["counters"]["succeeded"] == 0
    assert stats["counters"]["released"] >= 2  # the two running, and any prefetched


def test_a_second_sigint_stops_at_once_and_still_puts_the_jobs_back(target, workers):
    target.enqueue_lines(3)
    worker = Worker(target, "cli_handlers:slow", "--workers", "3", "--grace", "600")
    workers.append(worker)
    worker.wait_for(worker.out, "started", 3)
    worker.signal(signal.SIGINT)
    worker.wait_for(worker.err, "SIGINT: stopping")
    started = time.monotonic()
    worker.signal(signal.SIGINT)
    assert worker.exit_status() == 3
    assert time.monotonic() - started < 20  # not the 600 s grace
    stats = target.stats()
    assert held(stats) == {"ready": 3, "stored": 0, "processing": 0, "claims": 0}
    assert stats["counters"]["released"] == 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_worker_serves_prometheus_metrics(target, workers):
    target.enqueue_lines(3)
    port = free_port()
    worker = Worker(target, "cli_handlers:record", "--metrics-port", str(port))
    workers.append(worker)
    worker.wait_for(worker.out, "ran", 3)
    expected = [
        f'trioqueue_worker_succeeded_total{{queue="{target.queue}"}} 3.0',  # this process's
        f'trioqueue_queue_succeeded{{queue="{target.queue}"}} 3.0',  # the queue's
    ]
    deadline = time.monotonic() + TIMEOUT
    text = ""
    while not all(line in text for line in expected):  # the snapshot refreshes every second
        assert time.monotonic() < deadline, text
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                text = reply.read().decode()
        except OSError:
            time.sleep(0.1)  # the server is not listening yet
    for name in ("trioqueue_queue_enqueued", "trioqueue_queue_depth", "trioqueue_queue_inflight"):
        assert f"# TYPE {name} gauge" in text
    assert "# TYPE trioqueue_worker_handler_seconds histogram" in text
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("nocolon", "is not MODULE:HANDLER"),
        ("no_such_module_here:run", "cannot find module 'no_such_module_here'"),
        ("cli_missing_dependency:run", "it imports 'trioqueue_absent_dependency', which is not"),
        ("cli_handlers:missing", "has no 'missing'"),
        ("cli_handlers:not_async", "is not an async function"),
        # the two ways the README offers: async def, or a blocking function in a thread
        ("cli_handlers:not_async", "define it as `async def not_async(job): ...`"),
        ("cli_handlers:not_async", "@trioqueue.task(run_sync=True)"),
        ("cli_broken_module:run", "importing 'cli_broken_module' raised RuntimeError"),
        (".relative:run", "importing '.relative' raised TypeError"),
    ],
)
def test_a_bad_handler_is_a_one_line_error_and_touches_nothing(target, handler, message):
    target.enqueue_lines(1)
    result = target.run("worker", handler)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert held(target.stats())["ready"] == 1


@pytest.mark.parametrize(
    "options",
    [
        ["--workers", "0"],
        ["--min-idle", "0"],
        ["--grace", "-1"],
        ["--metrics-port", "70000"],
        ["--prefetch", "-3"],
    ],
)
def test_bad_worker_settings_are_refused(target, options):
    result = target.run("worker", "cli_handlers:record", *options)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("table", ["tasks", "task_list"])
def test_one_worker_runs_several_tasks_from_a_table_of_handlers(target, workers, table):
    for task, job_id in (("shout", "a"), ("whisper", "b")):
        result = target.run("enqueue", "--task", task, "--id", job_id, "{}")
        assert result.returncode == 0, result.stderr
    worker = Worker(target, f"cli_handlers:{table}")
    workers.append(worker)
    lines = worker.wait_for(worker.out, "", 3 if table == "task_list" else 2)
    if table == "task_list":  # the plain function ran in a worker thread
        assert "whispered in a thread" in lines
        lines.remove("whispered in a thread")
    assert sorted(lines) == ["shout a", "whisper b"]
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0


def test_enqueue_gives_every_job_its_headers(target, workers):
    result = target.run(
        "enqueue", "--header", "tenant=acme", "--header", "origin=cli", "--id", "h", "{}"
    )
    assert result.returncode == 0, result.stderr
    worker = Worker(target, "cli_handlers:show_headers")
    workers.append(worker)
    assert worker.wait_for(worker.out, "headers") == [
        'headers h {"origin": "cli", "tenant": "acme"}'
    ]
    refused = target.run("enqueue", "--header", "no-equals", "{}")
    assert refused.returncode == 2
    assert "is not NAME=VALUE" in refused.stderr


def test_jobs_shows_what_a_running_handler_reported(target, workers):
    assert target.run("enqueue", "--id", "half", "{}").returncode == 0
    worker = Worker(target, "cli_handlers:halfway")
    workers.append(worker)
    assert worker.wait_for(worker.out, "started") == ["started half"]
    listed = target.run("jobs", "claimed")
    assert listed.stdout.splitlines() == [
        "place    id    state       attempts  progress",
        'claimed  half  processing  0         {"done": 1, "of": 2}',
    ]
    as_json = json.loads(target.run("jobs", "claimed", "--json").stdout)
    assert as_json["progress"] == {"done": 1, "of": 2}


def test_result_waits_for_the_job_and_prints_what_its_handler_returned(target, workers):
    target.enqueue_lines(2)
    command = [sys.executable, "-m", "trioqueue", "result", "j0"]
    command += ["--redis", target.url, "--queue", target.queue]
    waiting = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        not_yet = target.run("result", "j1", "--timeout", "0.2")
        assert not_yet.returncode == 3
        assert not_yet.stderr.strip() == (
            "trioqueue result: job j1 has not finished within 0.2 s (it is received); wait "
            "longer, or without --timeout"
        )
        assert waiting.poll() is None  # still waiting: nobody ran j0
        workers.append(Worker(target, "cli_handlers:double"))
        out, err = waiting.communicate(timeout=TIMEOUT)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert (waiting.returncode, out, err) == (0, '{"double": 0}\n', "")
    done = target.run("result", "j1", "--timeout", "30")
    assert (done.returncode, done.stdout) == (0, '{"double": 2}\n')
    unknown = target.run("result", "nobody")
    assert unknown.returncode == 1
    assert "no job 'nobody'" in unknown.stderr


def test_result_of_a_dead_letter_says_it_failed_and_why(target, workers):
    target.enqueue_lines(1)
    options = ("--max-attempts", "1")
    workers.append(Worker(target, "cli_handlers:failing", *options))
    target.wait_for_dead_letters(1)
    failed = target.run("result", "j0")
    assert failed.returncode == 1
    assert failed.stderr.startswith("trioqueue result: job 'j0' failed: it is a dead letter")
    assert "RuntimeError: failing on purpose" in failed.stderr
    assert failed.stdout == ""


def test_cancel_from_another_process_stops_a_running_handler(target, workers):
    """The issue's test: the handler sees Cancelled, its finally runs, it is not retried."""
    target.enqueue_lines(3)
    worker = Worker(target, "cli_handlers:cancellable", "--workers", "1", "--grace", "0.2")
    workers.append(worker)
    assert worker.wait_for(worker.out, "started") == ["started j0 attempt 1"]
    waiting = target.run("cancel", "j1")  # not started: removed at once
    assert (waiting.returncode, waiting.stdout) == (0, "j1 cancelled\n")
    running = target.run("cancel", "j0", "--wait")
    assert running.returncode == 0, running.stderr
    assert running.stdout == "j0 cancelled: its worker stopped it\n"
    assert worker.wait_for(worker.out, "", 3) == [
        "cancelled j0",
        "finally j0",
        "started j2 attempt 1",
    ]
    result = target.run("result", "j0")
    assert result.returncode == 1
    assert "was cancelled: cancelled while a worker held it" in result.stderr
    again = target.run("cancel", "j0")
    assert again.returncode == 1
    assert "has finished already (cancelled)" in again.stderr
    assert target.run("cancel", "nobody").returncode == 1
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 3  # j2's handler was cancelled by the shutdown
    counters = target.stats()["counters"]
    assert (counters["cancelled"], counters["retries"], counters["failed"]) == (2, 0, 0)


def test_a_lifespan_is_entered_before_the_first_job_and_left_after_the_last(target, workers):
    target.enqueue_lines(2)
    worker = Worker(target, "cli_handlers:lifespan", "--lifespan")
    workers.append(worker)
    assert worker.wait_for(worker.out, "opened") == ["opened"]
    ran = worker.wait_for(worker.out, "ran", 2)
    assert sorted(ran) == ["ran j0 shared", "ran j1 shared"]
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0
    assert worker.wait_for(worker.out, "closed") == ["closed"]


@pytest.mark.parametrize(
    ("spec", "options", "said"),
    [
        ("cli_handlers:record", ["--lifespan"], "is not a lifespan"),
        ("cli_handlers:yields_no_handler", ["--lifespan"], "yielded None, not a handler"),
        ("cli_handlers:lifespan", [], "is not an async function"),
    ],
)
def test_a_lifespan_mistake_is_a_one_line_error(target, spec, options, said):
    result = target.run("worker", spec, *options)
    assert result.returncode == 2
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_three_workers_running_one_cron_file_run_each_tick_once(target, workers, tmp_path):
    """Every worker stores each tick under the same id: the queue keeps one job."""
    cron = tmp_path / "cron.toml"
    cron.write_text('[[schedule]]\nname = "beat"\nevery = 1\n', encoding="utf-8")
    for _ in range(3):
        workers.append(Worker(target, "cli_handlers:record", "--cron", str(cron)))
    for worker in workers:
        worker.wait_for(worker.err, ": ready")  # it reached Redis: the queue exists
    deadline = time.monotonic() + TIMEOUT
    while target.stats()["counters"]["succeeded"] < 4:
        assert time.monotonic() < deadline, "fewer than 4 ticks ran"
        time.sleep(0.2)
    stats = target.run("stats", "--interval", "0.05")
    assert stats.returncode == 0, stats.stderr
    assert "schedule beat: next tick " in stats.stdout
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.exit_status() == 0
        worker.close()  # its output is all read
    ran = [line.split()[1] for w in workers for line in list(w.out.queue) if line.startswith("ran")]
    assert len(ran) == len(set(ran)) >= 4  # no tick ran twice
    ticks = sorted(datetime.datetime.fromisoformat(job_id.split("@")[1]) for job_id in ran)
    assert all(b - a == datetime.timedelta(seconds=1) for a, b in itertools.pairwise(ticks))
    counters = target.stats()["counters"]
    assert counters["succeeded"] == len(ran)
    assert counters["deduplicated"] >= len(ran)  # each tick was offered by more than one


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[[schedule]]\nname = 'x'\n", "give cron='…'"),
        ("[[schedule]]\nname = 'x'\ncron = '61 * * * *'\n", "not a cron expression"),
        ("[[schedule]]\nname = 'x'\nevery = 1\nzone = 'UTC'\n", "unknown keys ['zone']"),
        ("name = 'x'\n", "give one [[schedule]] table per schedule"),
        ("[[schedule\n", "not a TOML file"),
        ("[[schedule]]\nname = 'x'\nevery = nan\n", "every = nan: give a whole number"),
        ("[[schedule]]\nname = 'x'\nevery = inf\n", "every = inf: give a whole number"),
        ("[[schedule]]\nname = 'x'\nevery = 1e300\n", "every = 1e+300: give a whole number"),
        (
            "[[schedule]]\nname = 'x'\nevery = 1\npayload = " + "[" * 200 + "]" * 200 + "\n",
            "payload nests lists and dicts more than",
        ),
        ('[[schedule]]\nname = "x"\nevery = 1\npayload = "\\uD800"\n', "not a TOML file"),
    ],
)
def test_a_bad_cron_file_is_a_one_line_error_naming_the_file(target, tmp_path, content, said):
    cron = tmp_path / "cron.toml"
    cron.write_text(content, encoding="utf-8")
    result = target.run("worker", "cli_handlers:record", "--cron", str(cron))
    assert result.returncode == 2
    assert said in result.stderr
    assert f"--cron {cron}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    target.assert_untouched()


# --- enqueue --------------------------------------------------------------------------


def test_enqueue_is_idempotent_by_id_and_reports_conflicts(target):
    assert target.run("enqueue", '{"to": "a"}', "--id", "w1").stdout == "w1 enqueued\n"
    assert target.run("enqueue", '{"to": "a"}', "--id", "w1").stdout == "w1 already there\n"
    conflict = target.run("enqueue", '{"to": "b"}', "--id", "w1")
    assert conflict.returncode == 1
    assert conflict.stderr.startswith("trioqueue enqueue: ")
    assert "already exists with a different payload" in conflict.stderr
    counters = target.stats()["counters"]
    assert (counters["enqueued"], counters["deduplicated"], counters["conflicts"]) == (1, 1, 1)


def test_enqueue_with_a_delay_or_a_due_time_schedules_the_jobs(target):
    result = target.run("enqueue", '{"to": "a"}', "--id", "d1", "--delay", "3600")
    assert result.returncode == 0, result.stderr
    name, _, when = result.stdout.strip().partition(" scheduled for ")
    assert name == "d1"
    due = datetime.datetime.fromisoformat(when)
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    assert abs((due - soon).total_seconds()) < 30  # the server's clock: near this one
    again = target.run("enqueue", '{"to": "a"}', "--id", "d1")
    assert again.stdout == f"d1 already there, scheduled for {when}\n"
    lines = '{"id": "e1"}\n{"id": "e2"}\n'
    result = target.run(
        "enqueue", "--id-key", "id", "--at", "2099-01-01T00:00:00+00:00", stdin=lines
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "accepted 2, deduplicated 0, conflicts 0 (2 of the accepted scheduled for later)"
    )
    stats = target.stats()
    assert (stats["ready"], stats["scheduled"]) == (0, 3)
    shown = target.run("stats")
    assert "3 scheduled for later" in shown.stdout
    assert "0 waiting for the jobs they run after" in shown.stdout
    assert target.run_here("enqueue", "--id", "then", "--after", "e1", '"t"').returncode == 0
    assert target.stats()["deferred"] == 1
    assert "1 waiting for the jobs they run after" in target.run("stats").stdout


def test_enqueue_stores_a_jobs_own_attempts_and_handler_timeout(target):
    result = target.run(
        "enqueue", "--id", "o", "--max-attempts", "2", "--handler-timeout", "1.5", '{"n": 1}'
    )
    assert result.returncode == 0, result.stderr

    async def claimed() -> tuple[int | None, float | None]:
        async with trioqueue.RedisBackend(target.url, queue=target.queue, min_idle=30) as backend:
            [claim] = await backend.claim(1, lease=30, block=0)
            return claim.job.max_attempts, claim.job.handler_timeout

    assert trio.run(claimed) == (2, 1.5)
    bad = target.run("enqueue", "--max-attempts", "0", '{"n": 2}')
    assert bad.returncode == 2
    assert "--max-attempts" in bad.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "2030-01-01T00:00:00"], "has no time zone"),
        (["--at", "tomorrow"], "is not an ISO 8601 time"),
        (["--delay", "-5"], "seconds >= 0"),
        (["--delay", "5", "--at", "2030-01-01T00:00:00Z"], "not allowed with argument"),
    ],
)
def test_a_bad_delay_or_due_time_is_a_usage_error_and_sends_nothing(target, args, message):
    result = target.run("enqueue", '{"n": 1}', "--id", "x", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    target.assert_untouched()


def test_bulk_enqueue_reports_accepted_deduplicated_and_conflicts(target):
    target.run("enqueue", '{"id": "b", "n": 0}', "--id", "b")
    lines = '{"id": "a", "n": 1}\n\n{"id": "b", "n": 0}\n{"id": "b", "n": 9}\n{"id": "c"}\n'
    result = target.run("enqueue", "--id-key", "id", stdin=lines)
    assert result.returncode == 1  # one conflict
    assert result.stdout.strip() == "accepted 2, deduplicated 1, conflicts 1"
    assert held(target.stats())["ready"] == 3


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (['{"to": '], None, "the job is not JSON"),
        ([], '{"n": 1}\n{"n": 2\n', "line 2 is not JSON"),
        (["--id-key", "id"], '{"id": "a"}\n{"n": 2}\n', "line 2 has no string 'id'"),
        (["--id", "x"], '{"n": 1}\n', "--id names one job"),
        (['{"n": 1}', "--id", ""], None, "1 to 256 characters"),
        (["NaN"], None, "JSON-serialisable"),
    ],
)
def test_bad_enqueue_input_enqueues_nothing(target, args, stdin, message):
    result = target.run("enqueue", *args, stdin=stdin)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    target.assert_untouched()


class Producer:
    """A ``trioqueue enqueue`` subprocess on *target*'s queue whose stderr is read as it comes."""

    def __init__(self, target: Target, *args: str, stdin: Any = subprocess.PIPE) -> None:
        command = [sys.executable, "-m", "trioqueue", "enqueue", *args]
        command += ["--redis", target.url, "--queue", target.queue]
        self.process = subprocess.Popen(
            command,
            cwd=HERE,
            env=environment(),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: stdlib_queue.Queue[str] = stdlib_queue.Queue()
        self.pump = threading.Thread(target=Worker._pump, args=(self.process.stderr, self.err))
        self.pump.start()

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + TIMEOUT
        while True:
            line = self.err.get(timeout=max(0.0, deadline - time.monotonic()))
            if text in line:
                return line

    def finish(self) -> tuple[int, str]:
        """The exit status and standard output (a process that does not end fails the test)."""
        status = self.process.wait(timeout=TIMEOUT)  # its output is one line: no pipe fills
        out = self.process.stdout.read() if self.process.stdout else ""
        self.pump.join(timeout=TIMEOUT)
        return status, out

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def producers() -> Iterator[list[Producer]]:
    started: list[Producer] = []
    yield started
    for producer in started:
        producer.close()


def lines_of(count: int) -> str:
    return "".join(json.dumps({"n": n, "id": f"j{n}"}) + "\n" for n in range(count))


def test_enqueue_into_a_full_queue_says_it_waits_and_an_interrupt_prints_the_summary(
    target, producers
):
    producer = Producer(target, "--id-key", "id", "--capacity", "2")
    producers.append(producer)
    assert producer.process.stdin is not None
    producer.process.stdin.write(lines_of(3))
    producer.process.stdin.close()
    line = producer.wait_for("waiting for room")
    assert line == (
        "trioqueue enqueue: waiting for room: 2 of 3 enqueued, the queue is full "
        "(capacity 2); workers free it"
    )
    producer.process.send_signal(signal.SIGINT)
    status, out = producer.finish()
    assert status == 130
    assert out == "accepted 2, deduplicated 0, conflicts 0, not sent 1\n"


def test_a_single_enqueue_waits_for_room_saying_so_until_a_worker_frees_it(
    target, producers, workers
):
    target.run("enqueue", "--id-key", "id", "--capacity", "1", stdin=lines_of(1))
    producer = Producer(target, '{"n": 9}', "--id", "late", "--capacity", "1")
    producers.append(producer)
    producer.wait_for("waiting for room: 0 of 1 enqueued, the queue is full (capacity 1)")
    worker = Worker(target, "cli_handlers:record", "--capacity", "1")
    workers.append(worker)
    status, out = producer.finish()
    assert (status, out) == (0, "late enqueued\n")


def test_enqueue_no_wait_refuses_a_full_queue_and_reports_what_was_not_accepted(target):
    result = target.run("enqueue", "--id-key", "id", "--capacity", "2", "--no-wait",
                        stdin=lines_of(4))  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == "accepted 2, deduplicated 0, conflicts 0, not sent 2\n"
    assert (
        "trioqueue enqueue: the queue is full (capacity 2): 2 not accepted, from job j2 on; "
        in result.stderr
    )
    assert target.stats()["counters"]["enqueued"] == 2
    single = target.run("enqueue", '{"n": 1}', "--capacity", "2", "--no-wait")
    assert single.returncode == 1
    assert "1 not accepted" in single.stderr
    conflicting = target.run("enqueue", "--no-wait", "--submit", '{"n": 1}')
    assert conflicting.returncode == 2
    assert "not allowed with argument" in conflicting.stderr


def test_enqueue_submit_stores_what_does_not_fit(target):
    result = target.run("enqueue", "--id-key", "id", "--capacity", "2", "--submit",
                        stdin=lines_of(3))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "accepted 3, deduplicated 0, conflicts 0 (1 of the accepted stored until the queue "
        "has room)\n"
    )
    single = target.run("enqueue", '{"n": 1}', "--id", "s", "--capacity", "2", "--submit")
    assert (single.returncode, single.stdout) == (0, "s stored until the queue has room\n")
    stats = target.stats()
    assert (stats["ready"], stats["stored"]) == (2, 2)


def test_enqueue_from_a_terminal_says_how_to_end_the_input(target, producers):
    import pty

    leader, follower = pty.openpty()
    try:
        producer = Producer(target, stdin=follower)
        producers.append(producer)
        producer.wait_for(
            "trioqueue enqueue: reading one JSON payload per line from standard input; "
            "end with Ctrl-D"
        )
        os.write(leader, b'{"n": 1}\n\x04')
        status, out = producer.finish()
    finally:
        os.close(follower)
        os.close(leader)
    assert (status, out) == (0, "accepted 1, deduplicated 0, conflicts 0\n")


@pytest.mark.parametrize(
    "command", [["enqueue", '{"n": 1}'], ["stats"], ["dead", "list"]], ids=lambda c: c[0]
)
def test_an_unreachable_redis_is_a_one_line_error(command):
    result = cli(*command, "--redis", f"redis://127.0.0.1:{free_port()}", "--queue", "{q}")
    assert result.returncode == 1
    assert "could not be reached" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_queue_is_taken_from_the_environment_unless_given(target):
    env = {"TRIOQUEUE_QUEUE": target.queue}
    result = cli("enqueue", '{"n": 1}', "--id", "e1", "--redis", target.url, env=env)
    assert (result.returncode, result.stdout) == (0, "e1 enqueued\n"), result.stderr
    assert target.stats()["ready"] == 1  # the same queue, named by --queue
    other = queue_name()
    given = cli("enqueue", '{"n": 2}', "--redis", target.url, "--queue", other, env=env)
    assert given.returncode == 0, given.stderr
    assert target.stats()["ready"] == 1  # --queue wins over the environment


def test_without_a_queue_the_command_says_the_two_ways_to_give_one(redis_server):
    result = cli("stats", "--redis", redis_server.url)
    assert result.returncode == 2
    assert result.stderr == (
        "trioqueue stats: no queue: give --queue NAME or set TRIOQUEUE_QUEUE, "
        "e.g. --queue '{mail}'\n"
    )


def test_on_a_single_server_a_queue_needs_no_hash_tag(redis_server):
    name = f"plain.{uuid.uuid4().hex[:8]}"
    given = cli("enqueue", '{"n": 1}', "--redis", redis_server.url, "--queue", name)
    assert given.returncode == 0, given.stderr
    result = cli(
        "stats", "--json", "--interval", "0.05", "--redis", redis_server.url, "--queue", name
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ready"] == 1


# --- stats ----------------------------------------------------------------------------


def test_stats_shows_lists_claims_dead_letters_and_throughput(target, workers):
    target.enqueue_lines(4)
    worker = Worker(target, "cli_handlers:slow", "--workers", "1")
    workers.append(worker)
    worker.wait_for(worker.out, "started")
    result = target.run("stats", "--interval", "0.1")
    assert result.returncode == 0, result.stderr
    first, counters, throughput = result.stdout.strip().splitlines()
    assert "3 ready" in first
    assert "1 claimed (oldest " in first
    assert "0 dead" in first
    assert "enqueued=4" in counters
    assert throughput.startswith("throughput: 0.0 jobs/s")


def test_stats_on_a_queue_the_server_never_saw_says_so(target):
    result = target.run("stats", "--interval", "0.05")
    assert result.returncode == 1
    assert f"the queue {target.queue} does not exist yet on " in result.stderr
    assert "check --queue and the Redis URL" in result.stderr
    assert result.stdout == ""
    target.run("enqueue", '{"n": 1}')
    assert target.stats()["ready"] == 1  # once used, it is there


# --- dead letters ---------------------------------------------------------------------


def make_dead_letters(target: Target, workers: list[Worker], count: int) -> None:
    target.enqueue_lines(count)
    worker = Worker(target, "cli_handlers:failing", "--max-attempts", "1")
    workers.append(worker)
    target.wait_for_dead_letters(count)
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0


def test_dead_letters_can_be_listed_shown_requeued_and_purged(target, workers):
    make_dead_letters(target, workers, 4)
    listed = target.run("dead", "list").stdout.splitlines()
    assert listed[0].split() == ["id", "attempts", "reason", "last", "error"]
    assert sorted(line.split()[0] for line in listed[1:]) == ["j0", "j1", "j2", "j3"]
    assert all(" RuntimeError: failing on purpose" in line for line in listed[1:])
    bare = target.run("dead", "list", "--no-header").stdout.splitlines()
    assert [line.split() for line in bare] == [line.split() for line in listed[1:]]
    shown = json.loads(target.run("dead", "show", "j0").stdout)
    assert (shown["state"], shown["attempts"]) == ("failed", 1)

    assert target.run("dead", "requeue", "j0").stdout == "j0 requeued\n"
    assert target.run("dead", "purge", "j1").stdout == "purged 1\n"
    stats = target.stats()
    assert (stats["dead"], stats["ready"]) == (2, 1)
    assert target.run("dead", "show", "j0").returncode == 1  # no longer a dead letter

    assert target.run("dead", "requeue", "--all").returncode == 0
    stats = target.stats()
    assert (stats["dead"], stats["ready"]) == (0, 3)
    assert stats["counters"]["dead_requeued"] == 3


def test_a_dead_letter_that_never_was_json_lists_and_shows(target, workers):
    async def push() -> None:
        async with coredis.Redis.from_url(target.url) as raw:
            await raw.lpush(target.queue, [b"\xff not json"])  # another client's bytes

    trio.run(push)
    make_dead_letters(target, workers, 1)  # a worker claims both: two dead letters
    listed = [json.loads(line) for line in target.run("dead", "list", "--json").stdout.splitlines()]
    raw = next(record for record in listed if record["payload"] is None)
    assert raw["payload_raw"] == "\\xff not json"
    assert raw["reason"].startswith("undecodable record: not JSON")
    shown = target.run("dead", "show", raw["id"])
    assert shown.returncode == 0, shown.stderr
    created = json.loads(shown.stdout)["created_at"]
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", created)


def test_without_dead_letters_list_and_requeue_all_say_so(target):
    target.run("enqueue", '{"n": 1}')
    listed = target.run("dead", "list")
    assert (listed.returncode, listed.stdout) == (0, "")
    assert f"no dead letters in {target.queue}" in listed.stderr
    as_json = target.run("dead", "list", "--json")
    assert (as_json.returncode, as_json.stdout, as_json.stderr) == (0, "", "")
    requeued = target.run("dead", "requeue", "--all")
    assert (requeued.returncode, requeued.stdout) == (0, "")
    assert "no dead letters" in requeued.stderr
    assert "nothing requeued" in requeued.stderr


def test_purge_all_forgets_every_dead_letter(target, workers):
    make_dead_letters(target, workers, 2)
    assert target.run("dead", "purge", "--all").stdout == "purged 2\n"
    assert target.stats()["dead"] == 0


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["requeue"], 2, "name one job id, or pass --all"),
        (["purge"], 2, "name one job id, or pass --all"),
        (["show", "--all"], 2, "dead show takes one job id"),
        (["requeue", "nobody"], 1, "no job 'nobody' among the dead letters"),
        (["show", "nobody"], 1, "no job 'nobody'"),
    ],
)
def test_bad_dead_letter_commands_say_what_to_do(target, args, status, message):
    result = target.run("dead", *args)
    assert result.returncode == status
    assert message in result.stderr
    assert "Traceback" not in result.stderr


# --- demo on Redis ----------------------------------------------------------------------


def test_the_demo_runs_on_redis(redis_server):
    result = cli(
        "demo", "--redis", redis_server.url, "--jobs", "300", "--fail-rate", "0.3",
        "--seed", "2", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["enqueued"] == 300
    assert report["succeeded"] + report["dead_lettered"] == 300
    assert report["conserved"] is True


def test_the_demo_on_redis_names_its_queue_so_its_dead_letters_can_be_listed(redis_server):
    result = cli(
        "demo", "--redis", redis_server.url, "--jobs", "100", "--fail-rate", "0.5",
        "--max-attempts", "1", "--capacity", "16", "--seed", "3", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    dead = json.loads(result.stdout)["dead_lettered"]
    assert dead > 0
    match = re.search(r"running on the Redis queue (\{trioqueue-demo-\w+\})", result.stderr)
    assert match, result.stderr
    command = re.search(r"`trioqueue (dead list [^`]*)`", result.stderr)
    assert command, result.stderr
    listed = cli(*command.group(1).replace("'", "").split(), "--redis", redis_server.url)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == dead + 1  # and the header


def test_python_dash_m_and_the_console_script_are_the_same():
    script = Path(sys.executable).with_name("trioqueue")
    assert script.exists(), "the console script is installed next to the interpreter"
    result = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, check=False, timeout=TIMEOUT,
        env={**os.environ},
    )  # fmt: skip
    assert result.returncode == 0
    for command in ("demo", "worker", "enqueue", "stats", "dead"):
        assert command in result.stdout


@pytest.mark.parametrize(
    "url", ["notaurl", "", "http://localhost:6379", "redis://localhost:99999", "redis://h:abc"]
)
def test_a_bad_redis_url_is_a_one_line_usage_error(url):
    result = cli("stats", "--redis", url, "--queue", "{q}")
    assert result.returncode == 2
    assert "Redis URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_password_in_the_url_never_reaches_the_messages():
    url = f"redis://user:s3cretpw@127.0.0.1:{free_port()}/0"
    result = cli("enqueue", '{"n": 1}', "--redis", url, "--queue", "{q}")
    assert result.returncode == 1
    assert "could not be reached" in result.stderr
    assert "s3cretpw" not in result.stderr
    assert "user:***@127.0.0.1" in result.stderr


def test_a_busy_metrics_port_is_a_one_line_error(target):
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        result = target.run("worker", "cli_handlers:record", "--metrics-port", str(taken))
    assert result.returncode == 2
    assert f"--metrics-port {taken}: cannot serve metrics there" in result.stderr
    assert "Traceback" not in result.stderr


def test_commands_follow_the_settings_stored_with_the_queue(target):
    created = target.run("enqueue", '{"n": 1}', "--id", "a", "--capacity", "2", "--key-ttl", "3600")
    assert created.returncode == 0, created.stderr
    assert target.run("enqueue", '{"n": 2}', "--id", "b").returncode == 0  # no settings given
    full = target.run("enqueue", '{"n": 3}', "--id", "c", "--no-wait")
    assert full.returncode == 1
    assert "the queue is full (capacity 2)" in full.stderr  # the queue's, not the default


def test_settings_that_disagree_with_the_queue_are_named_together(target):
    assert (
        target.run("enqueue", '{"n": 1}', "--capacity", "64", "--key-ttl", "3600").returncode == 0
    )
    refused = target.run("enqueue", '{"n": 2}', "--capacity", "5", "--key-ttl", "10")
    assert refused.returncode == 2
    [line] = refused.stderr.splitlines()
    assert "capacity=64 (yours: 5), key_ttl=3600.0 (yours: 10.0)" in line
    assert "trioqueue queue configure" in line
    assert target.stats()["ready"] == 1  # nothing written; reading needs no agreement


def test_queue_show_and_configure_read_and_change_the_settings(target):
    assert target.run("enqueue", '{"n": 1}', "--capacity", "2").returncode == 0
    shown = target.run("queue", "show")
    assert shown.stdout == "capacity=2, mode=reliable, key_ttl=None\n", shown.stderr
    changed = target.run("queue", "configure", "--capacity", "3")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout == f"{target.queue}: capacity=2 -> 3\n"
    assert "follow the new settings at once" in changed.stderr
    as_json = json.loads(target.run("queue", "show", "--json").stdout)
    assert as_json == {
        "capacity": 3,
        "reliable": True,
        "key_ttl": None,
        "paused": False,
        "rate_limits": {"queue": None, "per_key": None},
    }
    configured = target.run("queue", "configure", "--capacity", "4", "--json")
    assert configured.returncode == 0, configured.stderr
    assert json.loads(configured.stdout)["capacity"] == 4
    refused = target.run("queue", "configure", "--mode", "simple")
    assert refused.returncode == 2
    assert "holds 1 waiting and 0 claimed jobs" in refused.stderr
    assert "let the workers drain it" in refused.stderr
    assert json.loads(target.run("queue", "show", "--json").stdout)["reliable"] is True


def test_queue_pause_stops_a_running_worker_claiming_and_resume_lets_it_go_on(target, workers):
    worker = Worker(target, "cli_handlers:record")
    workers.append(worker)
    target.enqueue_lines(1)
    assert worker.wait_for(worker.out, "ran") == ["ran j0"]
    paused = target.run("queue", "pause")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith(f"{target.queue}: paused: workers finish the jobs they hold")
    assert (
        target.run("queue", "show").stdout == "capacity=1000, mode=reliable, key_ttl=None, paused\n"
    )
    result = target.run("enqueue", "--id", "later", '{"n": 9}')
    assert result.returncode == 0, result.stderr
    # the command line's plumbing; tests/contract/test_pause.py shows it stays unclaimed
    assert held(target.stats())["ready"] == 1
    resumed = target.run("queue", "resume", "--json")
    assert (resumed.returncode, resumed.stdout) == (0, '{"paused": false}\n')
    assert worker.wait_for(worker.out, "ran") == ["ran later"]
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0


def test_run_now_puts_a_delayed_job_on_the_ready_queue_and_refuses_one_not_waiting(target):
    assert target.run_here("enqueue", "--id", "later", "--delay", "3600", '"x"').returncode == 0
    assert target.run_here("enqueue", "--id", "ready", '"y"').returncode == 0
    moved = target.run("run-now", "later")
    assert (moved.returncode, moved.stdout) == (0, "later runs now: on the ready queue\n")
    assert held(target.stats())["ready"] == 2
    for job_id in ("later", "ready", "nobody"):  # none of them waits for a due time now
        refused = target.run_here("run-now", job_id)
        assert refused.returncode == 1
        assert f"job {job_id} is not waiting for a due time" in refused.stderr
        assert "trioqueue jobs scheduled" in refused.stderr


def test_queue_rate_limit_sets_keeps_and_removes_each_limit(target):
    added = target.run_here("enqueue", "--id", "keyed", '{"n": 1}', "--rate-key", "acme")
    assert added.returncode == 0, added.stderr
    limited = target.run("queue", "rate-limit", "--rate", "100/1m", "--per-key", "2/s burst 2")
    assert limited.returncode == 0, limited.stderr
    assert limited.stdout == (
        f"{target.queue}: rate limits queue 100/60s, per key 2/1s burst 2; every worker on the "
        "queue follows at once\n"
    )
    shown = target.run_here("queue", "show").stdout
    assert shown.endswith(", rate limits queue 100/60s, per key 2/1s burst 2\n")
    kept = target.run_here("queue", "rate-limit", "--rate", "none", "--json")
    assert json.loads(kept.stdout) == {"queue": None, "per_key": "2/1s burst 2"}
    shown_json = json.loads(target.run_here("queue", "show", "--json").stdout)
    assert shown_json["rate_limits"] == {"queue": None, "per_key": "2/1s burst 2"}

    async def rate_key_kept() -> str | None:
        async with trioqueue.RedisBackend(target.url, queue=target.queue) as backend:
            record = await trioqueue.Queue(backend).status("keyed")
            return None if record is None else record.rate_key

    assert trio.run(rate_key_kept) == "acme"
    bad = target.run("queue", "rate-limit", "--rate", "fast")
    assert bad.returncode == 2
    assert "write STARTS/PER, e.g. '10/s'" in bad.stderr
    assert "'none' to remove it" in bad.stderr
    too_long = target.run("queue", "rate-limit", "--per-key", "1/1e20s")
    assert too_long.returncode == 2
    assert "at most 31,622,400 (366 days)" in too_long.stderr
    assert trio.run(rate_key_kept) == "acme"  # nothing changed


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (["show"], 1, "does not exist yet"),
        (["rate-limit"], 2, "no limit to change: give --rate LIMIT"),
        (["pause", "--rate", "1/s"], 2, "takes no --rate or --per-key"),
        (["configure", "--capacity", "5"], 1, "does not exist yet"),
        (["configure"], 2, "nothing to change: give --capacity N"),
        (["show", "--capacity", "5"], 2, "use `queue configure`"),
        (["pause", "--capacity", "5"], 2, "`queue pause` takes no settings"),
        (["pause"], 1, "does not exist yet"),
        (["configure", "--key-ttl", "5", "--no-key-ttl"], 2, "not allowed with argument"),
    ],
)
def test_queue_command_mistakes_are_one_line_and_change_nothing(target, args, status, said):
    result = target.run("queue", *args)
    assert result.returncode == status
    [line] = result.stderr.splitlines()
    assert line.startswith("trioqueue queue: ")
    assert said in line
    target.assert_untouched()


def test_enqueue_refuses_lines_that_are_not_utf8(target):
    result = subprocess.run(
        [sys.executable, "-m", "trioqueue", "enqueue", "--redis", target.url, "--queue",
         target.queue],
        input=b'{"n": 1}\n{"n": "\xff"}\n',
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        cwd=HERE,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )  # fmt: skip
    assert result.returncode == 2
    assert b"line 2 is not UTF-8" in result.stderr
    target.assert_untouched()


def test_dead_show_and_list_are_only_about_dead_letters(target):
    target.run("enqueue", '{"n": 1}', "--id", "alive")
    shown = target.run("dead", "show", "alive")
    assert shown.returncode == 1
    assert "no job 'alive' among the dead letters" in shown.stderr
    listed = target.run("dead", "list", "alive")
    assert listed.returncode == 2
    assert "dead list takes no job id" in listed.stderr


def test_demo_queue_needs_redis():
    result = cli("demo", "--queue", "{q}")
    assert result.returncode == 2
    assert "--queue names a Redis queue" in result.stderr


# --- where the URL comes from -----------------------------------------------------------

URL_ENV = "TRIOQUEUE_REDIS_URL"


def dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.parametrize(
    ("redis", "file", "env", "used"),
    [
        ("good", None, None, "good"),
        (None, "good", None, "good"),
        (None, None, "good", "good"),
        ("good", "dead", "dead", "good"),
        ("dead", "good", "good", "dead"),
        (None, "good", "dead", "good"),
        (None, "dead", "good", "dead"),
    ],
)
def test_the_url_is_taken_from_redis_then_the_file_then_the_environment(
    redis_server, tmp_path, redis, file, env, used
):
    urls = {"good": redis_server.url, "dead": dead_url()}
    args = ["dead", "list", "--queue", queue_name()]
    if redis is not None:
        args += ["--redis", urls[redis]]
    if file is not None:
        path = tmp_path / "redis-url"
        path.write_text(urls[file] + "\n")
        args += ["--redis-url-file", str(path)]
    result = cli(*args, env={URL_ENV: urls[env]} if env is not None else None)
    if used == "good":
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 1
        assert f"the backend at {urls['dead']} could not be reached" in result.stderr


@pytest.mark.parametrize("source", ["file", "env"])
@pytest.mark.parametrize(
    "command", [["enqueue", '{"n": 1}'], ["stats"], ["dead", "list"]], ids=lambda c: c[0]
)
def test_every_redis_command_takes_the_url_from_a_file_or_the_environment(
    redis_server, tmp_path, source, command
):
    path = tmp_path / "redis-url"
    path.write_text(redis_server.url)
    given = ["--redis-url-file", str(path)] if source == "file" else []
    result = cli(
        *command, *given, "--queue", queue_name(),
        env={URL_ENV: redis_server.url} if source == "env" else None,
    )  # fmt: skip
    if command == ["stats"]:  # it reached the server, which never saw the queue
        assert result.returncode == 1
        assert "does not exist yet on redis://" in result.stderr
    else:
        assert result.returncode == 0, result.stderr


def test_without_a_url_the_command_says_the_three_ways_to_give_one():
    result = cli("stats", "--queue", "{q}")
    assert result.returncode == 2
    for way in ("--redis URL", "--redis-url-file PATH", URL_ENV):
        assert way in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["worker", "enqueue", "stats", "dead"])
def test_help_says_which_url_is_taken_first(command):
    result = cli(command, "--help", env={"COLUMNS": "1000"})  # no wrapping
    assert result.returncode == 0
    assert "--redis-url-file PATH" in result.stdout
    assert (
        "The first given is used: --redis, then --redis-url-file, then $TRIOQUEUE_REDIS_URL"
        in result.stdout
    )
    assert "shows in `ps`" in result.stdout


def test_the_demo_reads_the_url_file_but_not_the_environment(tmp_path):
    path = tmp_path / "redis-url"
    path.write_text(dead_url())
    from_file = cli("demo", "--jobs", "10", "--json", "--redis-url-file", str(path))
    assert from_file.returncode == 1
    assert "could not be reached" in from_file.stderr
    # a variable exported for the other commands leaves the demo in memory
    in_memory = cli("demo", "--jobs", "10", "--json", env={URL_ENV: dead_url()})
    assert in_memory.returncode == 0, in_memory.stderr
    help_text = cli("demo", "--help", env={"COLUMNS": "1000"}).stdout
    assert "(this command does not read $TRIOQUEUE_REDIS_URL)" in help_text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it (No such file or directory)"),
        (b"", "holds no line"),
        (b"\n  \n", "holds no line"),
        (b"redis://a:1/0\nredis://b:2/0\n", "holds 2 lines"),
        (b"\xff\n", "is not UTF-8 text"),
    ],
)
def test_a_bad_url_file_is_a_one_line_error(tmp_path, content, message):
    path = tmp_path / "redis-url"
    if content is not None:
        path.write_bytes(content)
    result = cli("stats", "--queue", "{q}", "--redis-url-file", str(path))
    assert result.returncode == 2
    assert f"--redis-url-file {path}" in result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- the password is never shown ---------------------------------------------------------

# a password whose pieces, between the characters a URL reserves, no other text holds
SECRET = "Zq@Xy#7?Kw"
PIECES = ("Zq", "Xy", "Kw")


@pytest.mark.parametrize("source", ["--redis", "file", "env"])
@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "percent-encode special characters"),
        (f"redis://alice:{SECRET}@127.0.0.1:6379/0", "percent-encode special characters"),
        ("redis://:ZqXyKw", "its port is not a number"),  # the host forgotten
        ("ZqXyKw@localhost:6379", "it has no scheme"),
        ("http://:ZqXyKw@localhost:6379", "http:// is not a Redis scheme"),
    ],
)
def test_a_bad_url_is_refused_without_echoing_it(tmp_path, source, url, message):
    args = ["stats", "--queue", "{q}"]
    env = None
    if source == "--redis":
        args += ["--redis", url]
    elif source == "file":
        path = tmp_path / "redis-url"
        path.write_text(url)
        args += ["--redis-url-file", str(path)]
    else:
        env = {URL_ENV: url}
    result = cli(*args, env=env)
    assert result.returncode == 2
    assert "not a Redis URL" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    for piece in PIECES:
        assert piece not in result.stderr


@pytest.mark.parametrize(
    "form",
    [
        "redis://:{encoded}@127.0.0.1:{port}/0",
        "redis://alice:{encoded}@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password={encoded}",
        "redis://127.0.0.1:{port}/0?db=0&password={encoded}&client_name=w",
        "redis://alice:Zq@Xy@Kw@127.0.0.1:{port}/0",  # a raw `@` is allowed
        "redis://ZqXyKw@127.0.0.1:{port}/0",  # a password without its colon
    ],
)
@pytest.mark.parametrize("command", [["enqueue", '{"n": 1}'], ["stats"]], ids=lambda c: c[0])
def test_no_form_of_password_reaches_the_error_messages(form, command):
    import urllib.parse

    url = form.format(encoded=urllib.parse.quote(SECRET, safe=""), port=free_port())
    result = cli(*command, "--redis", url, "--queue", "{q}")
    assert result.returncode == 1
    assert "could not be reached" in result.stderr
    assert "***" in result.stderr
    for piece in PIECES:
        assert piece not in result.stderr


# --- refused credentials ------------------------------------------------------------------


def remaining_lines(worker: Worker) -> list[str]:
    """Every line the worker wrote to standard error, once it has exited."""
    for pump in worker.pumps:
        pump.join(timeout=TIMEOUT)
    lines = list(worker.err_text)
    while not worker.err.empty():
        lines.append(worker.err.get_nowait())
    return lines


def test_a_worker_waits_out_refused_credentials_and_carries_on(workers):
    import urllib.parse

    from .test_redis_url import ENCODED, PASSWORD, redis_command, start_password_server

    server = start_password_server()
    try:
        target = Target(server)
        target.url = f"redis://:{ENCODED}@127.0.0.1:{server.port}/0"
        target.enqueue_lines(2)
        port = free_port()
        # the URL from the environment: the password is not on the command line. A short
        # min_idle: a claim made as Redis takes the password back can run on the server
        # with its reply lost to the worker (seen here: the job sat in the claims set),
        # and the sweeper recovers such a claim after min_idle; this test need not wait 30 s
        worker = Worker(
            target,
            "cli_handlers:record",
            "--metrics-port",
            str(port),
            "--min-idle",
            "3",
            env={URL_ENV: target.url},
        )
        workers.append(worker)
        assert sorted(worker.wait_for(worker.out, "ran", 2)) == ["ran j0", "ran j1"]
        started = worker.wait_for(worker.err, "worker on reliable queue")[0]
        assert f"at redis://:***@127.0.0.1:{server.port}/0" in started

        time.sleep(1.5)  # idle: the fetcher waits in BLMOVE
        other = "0ther-pw"
        assert redis_command(
            server.port, "CONFIG", "SET", "requirepass", other, password=PASSWORD
        ) == b"+OK\r\n"  # fmt: skip
        redis_command(server.port, "CLIENT", "KILL", "TYPE", "normal", password=other)
        refused = worker.wait_for(worker.err, "refused the credentials")[0]
        assert " ERROR trioqueue." in refused
        assert "check the password and the ACL user" in refused
        time.sleep(1)  # it retries, and goes on running
        assert worker.process.poll() is None

        meanwhile = Target(server)
        meanwhile.url = f"redis://:{urllib.parse.quote(other)}@127.0.0.1:{server.port}/0"
        meanwhile.queue = target.queue
        for job_id in ("k0", "k1"):
            result = meanwhile.run("enqueue", '{"n": 1}', "--id", job_id)
            assert result.returncode == 0, result.stderr
        redis_command(server.port, "CONFIG", "SET", "requirepass", PASSWORD, password=other)
        assert sorted(worker.wait_for(worker.out, "ran", 2)) == ["ran k0", "ran k1"]

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            metrics = reply.read().decode()
        assert "trioqueue_worker_succeeded_total" in metrics
        worker.signal(signal.SIGTERM)
        assert worker.exit_status() == 0
        logged = "\n".join(remaining_lines(worker))
        for secret in (PASSWORD, ENCODED, other):
            assert secret not in logged
            assert secret not in metrics
    finally:
        server.close()


# --- the metrics endpoint -----------------------------------------------------------------


def listening_addresses(port: int) -> set[str]:
    """The local addresses (as /proc/net/tcp writes them) listening on TCP *port*."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
@pytest.mark.parametrize(
    ("options", "shown", "listening"),
    [
        ([], "127.0.0.1", {"0100007F"}),  # loopback only
        (["--metrics-addr", "0.0.0.0"], "0.0.0.0", {"00000000"}),
    ],
    ids=["default", "every-interface"],
)
def test_metrics_listen_on_loopback_unless_told_otherwise(
    target, workers, options, shown, listening
):
    port = free_port()
    worker = Worker(target, "cli_handlers:record", "--metrics-port", str(port), *options)
    workers.append(worker)
    worker.wait_for(worker.err, f"metrics on http://{shown}:{port}/metrics")
    assert listening_addresses(port) == listening
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0


def test_a_metrics_address_not_of_this_host_is_a_one_line_error(target):
    port = free_port()
    result = target.run(
        "worker", "cli_handlers:record", "--metrics-port", str(port), "--metrics-addr", "192.0.2.1"
    )
    assert result.returncode == 2
    assert f"--metrics-port {port}: cannot serve metrics there on 192.0.2.1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- the working directory ----------------------------------------------------------------


def test_the_working_directory_does_not_shadow_installed_modules(target, workers, tmp_path):
    fake = tmp_path / "prometheus_client"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        'raise RuntimeError("the fake prometheus_client of the working directory ran")\n'
    )
    (tmp_path / "here_handlers.py").write_text(
        "async def record(job):\n    print('ran', job.id, flush=True)\n"
    )
    target.enqueue_lines(1)
    port = free_port()
    script = Path(sys.executable).with_name("trioqueue")  # `python -m` puts the cwd first itself
    worker = Worker(
        target, "here_handlers:record", "--metrics-port", str(port),
        cwd=tmp_path, program=[str(script)],
    )  # fmt: skip
    workers.append(worker)
    assert worker.wait_for(worker.out, "ran") == ["ran j0"]  # the handler there is found
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert "trioqueue_worker_succeeded_total" in reply.read().decode()  # the real one serves
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0
    assert "fake" not in "\n".join(remaining_lines(worker))


# --- user data on the terminal ------------------------------------------------------------

EVIL_ID = "evil\x1b[31m\nid"
SHOWN_ID = "evil\\x1b[31m\\nid"


def test_job_ids_and_errors_are_printed_with_their_controls_escaped(target, workers, tmp_path):
    (tmp_path / "evil_handlers.py").write_text(
        "async def fail(job):\n    raise RuntimeError('bad\\x1b[2J\\nnews')\n"
    )
    enqueued = target.run("enqueue", '{"n": 1}', "--id", EVIL_ID)
    assert enqueued.stdout == f"{SHOWN_ID} enqueued\n"
    conflict = target.run("enqueue", '{"n": 2}', "--id", EVIL_ID)
    assert conflict.returncode == 1
    assert "\x1b" not in conflict.stderr
    assert len(conflict.stderr.strip().splitlines()) == 1

    worker = Worker(target, "evil_handlers:fail", "--max-attempts", "1", cwd=tmp_path)
    workers.append(worker)
    logged = worker.wait_for(worker.err, "dead-lettered")[0]
    assert SHOWN_ID in logged
    assert "bad\\x1b[2J\\nnews" in logged
    worker.signal(signal.SIGTERM)
    assert worker.exit_status() == 0
    assert "\x1b" not in "\n".join(remaining_lines(worker))

    listed = target.run("dead", "list", "--no-header")
    assert "\x1b" not in listed.stdout
    [line] = listed.stdout.splitlines()
    assert line.startswith(f"{SHOWN_ID}  1  ")
    assert line.endswith("  RuntimeError: bad\\x1b[2J\\nnews")
    # the id itself is unchanged: the raw one still names the job
    assert target.run("dead", "requeue", EVIL_ID).stdout == f"{SHOWN_ID} requeued\n"


def test_enqueue_takes_a_priority_and_stats_count_each_level(target):
    for priority, payload in (("2", '{"n": 1}'), ("-2", '{"n": 2}'), ("0", '{"n": 3}')):
        given = target.run("enqueue", payload, "--priority", priority)
        assert given.returncode == 0, given.stderr
    result = target.run("stats", "--interval", "0.05")
    assert result.returncode == 0, result.stderr
    assert "ready by priority: +2: 1, +1: 0, 0: 1, -1: 0, -2: 1" in result.stdout.splitlines()
    assert target.stats()["ready_by_priority"] == {"2": 1, "1": 0, "0": 1, "-1": 0, "-2": 1}
    refused = target.run("enqueue", '{"n": 4}', "--priority", "3")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "--priority: invalid choice: 3 (choose from 2, 1, 0, -1, -2)" in refused.stderr


def test_jobs_lists_each_place_with_state_and_attempts(target):
    target.enqueue_lines(2)  # j0, j1
    assert target.run_here("enqueue", "--id", "later", "--delay", "60", '"x"').returncode == 0
    after = target.run_here("enqueue", "--id", "next", "--after", "j1", '"y"')
    assert (after.returncode, after.stdout) == (0, "next waiting for the jobs it runs after\n")
    listed = target.run_here("jobs")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "place      id     state      attempts",
        "ready      j0     received   0",
        "ready      j1     received   0",
        "scheduled  later  scheduled  0",
        "deferred   next   deferred   0",
    ]
    bare = target.run("jobs", "scheduled", "deferred", "--no-header")  # for scripts
    assert bare.stdout.splitlines() == [
        "scheduled  later  scheduled  0",
        "deferred   next   deferred   0",
    ]
    as_json = target.run_here("jobs", "scheduled", "--json")
    assert json.loads(as_json.stdout) == {
        "place": "scheduled",
        "id": "later",
        "state": "scheduled",
        "attempts": 0,
    }
    assert target.run_here("jobs", "ready", "--limit", "1").stdout == (
        "place  id  state     attempts\nready  j0  received  0\n"
    )
    nothing = target.run_here("jobs", "stored")
    assert (nothing.returncode, nothing.stdout) == (0, "")
    assert nothing.stderr == "trioqueue jobs: no jobs in stored\n"
    wrong = target.run("jobs", "running")
    assert wrong.returncode == 2
    assert "'running' is not a place: name ready, stored, scheduled, deferred, claimed" in (
        wrong.stderr
    )
    keyed = [
        target.run_here("enqueue", "--id", job_id, "--unique-key", "k", '"k"')
        for job_id in ("k1", "k2")
    ]
    assert [k.stdout for k in keyed] == [
        "k1 enqueued\n",
        "k2 not added: job k1 holds its key\nk1 already there\n",
    ]
    unknown = target.run_here("enqueue", "--after", "nobody", '"z"')
    assert unknown.returncode == 1
    assert "no job 'nobody' among the queue's jobs" in unknown.stderr
    assert unknown.stdout == ""
    lines = target.run_here("enqueue", "--after", "nobody", stdin='"a"\n"b"\n')
    assert lines.returncode == 1
    assert lines.stdout == (
        "accepted 0, deduplicated 0, conflicts 0, refused 2 (a job named in --after is unknown)\n"
    )


def test_an_unknown_id_points_to_the_command_that_lists_jobs(target):
    for command, lists in (("cancel", "trioqueue jobs"), ("result", "trioqueue jobs")):
        unknown = target.run_here(command, "no-such-job")
        assert unknown.returncode == 1
        assert f"no job 'no-such-job' among the jobs; `{lists}` shows them" in unknown.stderr
        assert "Retention" not in unknown.stderr  # a Python class, not an option
    dead = target.run_here("dead", "show", "no-such-job")
    assert "`trioqueue dead list` shows them" in dead.stderr


def test_an_option_is_never_taken_for_a_longer_one_it_begins():
    # worker takes its handler as an argument; --handler is serve's, not --handler-timeout
    refused = cli("worker", "m:h", "--handler", "m:h", "--redis", "redis://h", "--queue", "q")
    assert refused.returncode == 2
    assert "unrecognized arguments: --handler m:h" in refused.stderr
    assert "worker takes its handler first, without --handler" in refused.stderr


def test_enqueue_says_what_became_of_the_job_in_each_state(target):
    """Every line ``enqueue JSON`` prints for a receipt, from jobs put in each state."""
    names = ["done", "drop", "dead", "hold"]
    found: dict[str, subprocess.CompletedProcess[str]] = {}
    holding, release = trio.Event(), trio.Event()

    def again(job_id: str, *args: str) -> subprocess.CompletedProcess[str]:
        return target.run_here("enqueue", json.dumps(job_id), "--id", job_id, *args)

    async def handler(job: trioqueue.Job) -> None:
        if job.id == "drop":
            raise trioqueue.Drop("not wanted")
        if job.id == "dead":
            raise RuntimeError("broken")
        if job.id == "retry":
            raise trioqueue.Retry(delay=3600)
        if job.id == "hold":
            holding.set()
            await release.wait()

    async def state_of(queue: trioqueue.Queue, job_id: str) -> trioqueue.JobState | None:
        record = await queue.status(job_id)
        return None if record is None else record.state

    async def put_in_each_state() -> None:
        async with trioqueue.RedisBackend(target.url, queue=target.queue, min_idle=30) as backend:
            queue = trioqueue.Queue(backend)
            await queue.enqueue("gone", id="gone", delay=3600)
            await queue.cancel("gone")
            await queue.enqueue_many(names, ids=names, max_attempts=1)
            await queue.enqueue("retry", id="retry", max_attempts=2)
            async with trioqueue.open_worker_pool(backend, handler, workers=8):
                with trio.fail_after(TIMEOUT):
                    await holding.wait()
                    for job_id in ("done", "drop", "dead"):
                        with contextlib.suppress(trioqueue.NoResult):
                            await queue.result(job_id)
                    # a poll: nothing signals that the retry's outcome was recorded
                    while await state_of(queue, "retry") is not trioqueue.JobState.FAILED_RETRY:  # noqa: ASYNC110
                        await trio.sleep(0.02)
                for job_id in [*names, "retry", "gone"]:
                    found[job_id] = await trio.to_thread.run_sync(again, job_id)
                release.set()
                await queue.cancel("retry")

    trio.run(put_in_each_state)
    assert {job_id: (r.returncode, r.stdout) for job_id, r in found.items()} == {
        "done": (0, "done already there, completed\n"),
        "drop": (0, "drop already there, dropped\n"),
        "dead": (0, "dead already there, a dead letter: failed 1 of 1 attempts "
                 "(RuntimeError: broken)\n"),
        "retry": (0, "retry already there, waiting to retry\n"),
        "hold": (0, "hold already there, running\n"),
        "gone": (0, "gone already there, cancelled\n"),
    }  # fmt: skip
    follower = again("after-dead", "--after", "dead")
    why = (
        "it was to run after job 'dead', which failed (it is a dead letter); "
        "requeue it to run it all the same"
    )
    assert (follower.returncode, follower.stdout) == (1, f"after-dead is a dead letter: {why}\n")
    assert again("after-dead", "--after", "dead").stdout == (
        f"after-dead already there, a dead letter: {why}\n"
    )
    lines = target.run_here("enqueue", "--after", "dead", stdin='"a"\n"b"\n')
    assert (lines.returncode, lines.stdout) == (
        1,
        "accepted 2, deduplicated 0, conflicts 0 (2 of the accepted dead letters at once: a job "
        "they run after did not complete; trioqueue jobs dead lists them)\n",
    )
    assert target.stats()["dead"] == 4
