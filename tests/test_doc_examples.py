"""Every example of the documentation site runs, and prints what the page shows.

Each ``docs/examples/NAME.py`` is shown by a page with its output,
``NAME.out``; these tests run it and compare. The memory backend's examples run
twice: on Trio's mock clock, and as a reader runs them (``python NAME.py``, the
real clock, a few seconds each), so that an example's output never depends on
the clock and none keeps a reader waiting. The Redis ones run on a private
server, with the worker and the commands of the tutorial run as a user runs
them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry, generate_latest

import trioqueue
from trioqueue._prometheus import MetricsCollector

if TYPE_CHECKING:
    from types import ModuleType

    from .redis_cluster import RedisCluster
    from .redis_server import RedisServer

EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"
ON_MEMORY = [
    "first_queue",
    "retries",
    "shutdown",
    "ingest_service",
    "worker_shutdown",
    "typed_payloads",
    "pause",
    "progress",
    "headers",
    "workflows",
    "unique_jobs",
    "rate_limits",
]
THREADED = ["tasks"]  # on the real clock: a mock clock jumps ahead while a thread works
IN_A_PROCESS = ["tracing"]  # it sets OpenTelemetry's global provider, once per process
ON_REDIS = ["redis_queue", "image_service", "shared_redis"]
ON_CLUSTER = ["cluster"]
HANDLERS = ["images", "mail"]  # what a worker imports; run by the tests beside them
EXAMPLE_TESTS = ["test_mail"]
OTHER_FILES = ["alerts.yml"]  # a user's own tests, run with pytest as a user runs them


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shown_output(name: str) -> str:
    return (EXAMPLES / f"{name}.out").read_text()


def as_shown(out: str, server: RedisServer) -> str:
    """An example's output on the tests' private server, as the page shows it on the
    default Redis: the first lines name the server, and must name the one it used."""
    assert f"url='{server.url}'>" in out.splitlines()[0]  # the variable's, not the default
    return out.replace(f"url='{server.url}'>", "url='redis://localhost:6379/0'>")


def test_every_example_is_run_here_and_shown_by_a_page():
    files = {path.stem for path in EXAMPLES.glob("*.py")}
    assert files == set(
        ON_MEMORY + THREADED + IN_A_PROCESS + ON_REDIS + ON_CLUSTER + HANDLERS + EXAMPLE_TESTS
    )
    pages = "".join(path.read_text() for path in (EXAMPLES.parent).rglob("*.md"))
    readme = [f"readme/{path.name}" for path in (EXAMPLES / "readme").glob("*.py")]
    assert len(readme) == 7  # run by test_readme.py
    for name in [f"{stem}.py" for stem in files] + OTHER_FILES + readme:
        assert f"examples/{name}" in pages, f"no page shows docs/examples/{name}"


def test_no_page_writes_python_that_no_test_runs():
    """Python on a page comes from a file here (literalinclude), which the tests run."""
    inline = [
        f"{path.relative_to(EXAMPLES.parent)}:{n}"
        for path in EXAMPLES.parent.rglob("*.md")
        if "_build" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.match(r"```+\s*(\{code-block\}\s*)?(python|py|pycon)\b", line.strip())
    ]
    assert inline == []


def console_commands() -> list[tuple[str, str]]:
    """Each ``trioqueue`` command of the pages' and the README's console blocks, and where."""
    pages = [p for p in EXAMPLES.parent.rglob("*.md") if "_build" not in p.parts]
    found = []
    for path in [*pages, EXAMPLES.parent.parent / "README.md"]:
        for block in re.findall(r"```console\n(.*?)```", path.read_text(), re.S):
            lines = block.splitlines()
            if any(line.startswith("$ ") for line in lines):  # the rest is their output
                lines = [line[2:] for line in lines if line.startswith("$ ")]
            for line in lines:
                for command in line.split("&&"):
                    words = shlex.split(command)
                    if words and words[0].endswith("trioqueue"):
                        found.append((path.name, command.strip()))
        for block in re.findall(r"```ini\n(.*?)```", path.read_text(), re.S):  # systemd units
            starts = re.findall(r"^ExecStart=(\S*trioqueue .*)$", block, re.M)
            found += [(path.name, start) for start in starts]
        for block in re.findall(r"```dockerfile\n(.*?)```", path.read_text(), re.S):
            entry = re.search(r"^ENTRYPOINT (\[.*\])$", block, re.M)
            cmd = re.search(r"^CMD (\[.*\])$", block, re.M)
            if entry and cmd and json.loads(entry[1])[0] == "trioqueue":
                found.append((path.name, shlex.join(json.loads(entry[1]) + json.loads(cmd[1]))))
    return found


def test_every_command_on_a_page_is_one_the_command_line_takes():
    """A console block's command parses: no option on a page has been renamed or removed."""
    from trioqueue._cli._parser import build_parser

    parser, _ = build_parser()
    commands = console_commands()
    assert len(commands) >= 12
    refused = []
    for where, command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            refused.append(f"{where}: {command}")
    assert refused == []


def test_the_alerting_rules_name_only_metrics_a_worker_serves():
    async def served() -> set[str]:
        backend = trioqueue.MemoryBackend()
        collector = MetricsCollector("q", backend.metrics)
        collector.refresh(await backend.stats())  # the queue-wide gauges too
        registry = CollectorRegistry()
        registry.register(collector)
        text = generate_latest(registry).decode()
        return {line.split("{")[0] for line in text.splitlines() if not line.startswith("#")}

    names = trio.run(served)
    lines = (EXAMPLES / "alerts.yml").read_text().splitlines()
    rules = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    used = set(re.findall(r"\btrioqueue_[a-z_]*[a-z]", rules))
    assert len(used) >= 5
    assert sorted(used - names) == []


@pytest.mark.parametrize("name", ON_MEMORY)
def test_a_memory_example_prints_what_its_page_shows(name, capsys):
    trio.run(load(name).main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert capsys.readouterr().out == shown_output(name)


@pytest.mark.parametrize("name", ON_MEMORY + THREADED + IN_A_PROCESS)
def test_an_example_run_as_a_program_prints_what_its_page_shows(name):
    """``python NAME.py``, as a reader runs it: on the real clock, in a few seconds."""
    result = subprocess.run(
        [sys.executable, f"{name}.py"],
        cwd=EXAMPLES, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, shown_output(name)), result.stderr


@pytest.mark.parametrize("name", THREADED)
def test_a_threaded_example_prints_what_its_page_shows(name, capsys):
    trio.run(load(name).main)
    assert capsys.readouterr().out == shown_output(name)


def test_the_how_to_s_own_tests_pass_as_a_user_runs_them():
    files = [f"{name}.py" for name in EXAMPLE_TESTS]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=EXAMPLES, capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    written = sum(
        len(re.findall(r"^(?:async )?def test_", (EXAMPLES / f"{name}.py").read_text(), re.M))
        for name in EXAMPLE_TESTS
    )
    assert f"{written} passed" in result.stdout


def test_seed_001_s_image_service_runs_as_written(redis_server: RedisServer, capsys, monkeypatch):
    monkeypatch.setenv("TRIOQUEUE_REDIS_URL", redis_server.url)
    trio.run(load("image_service").main)
    assert as_shown(capsys.readouterr().out, redis_server) == shown_output("image_service")


def test_a_handlers_own_redis_calls_run_as_written(redis_server: RedisServer, capsys, monkeypatch):
    monkeypatch.setenv("TRIOQUEUE_REDIS_URL", redis_server.url)
    trio.run(load("shared_redis").main)
    assert as_shown(capsys.readouterr().out, redis_server) == shown_output("shared_redis")


def test_the_redis_tutorial_runs_as_written(redis_server: RedisServer, capsys, monkeypatch):
    monkeypatch.setenv("TRIOQUEUE_REDIS_URL", redis_server.url)
    trio.run(load("redis_queue").main)
    assert as_shown(capsys.readouterr().out, redis_server) == shown_output("redis_queue")

    where = ["--redis", redis_server.url, "--queue", "{images}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIOQUEUE_")}

    def trioqueue_command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trioqueue", *args, *where],
            cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    worker = subprocess.Popen(
        [sys.executable, "-m", "trioqueue", "worker", "images:resize", *where],
        cwd=EXAMPLES, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        result = trioqueue_command("result", "resize-owl.png")  # waits for it
        assert (result.returncode, result.stdout) == (0, '{"thumbnail": "small-owl.png"}\n')
        stats = trioqueue_command("stats")
        assert stats.returncode == 0, stats.stderr
        assert stats.stdout.startswith("queue {images}: 0 ready,"), stats.stdout
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "worker on reliable queue {images}" in err


def test_the_mail_lifespan_opens_one_client_around_the_pool(monkeypatch):
    mail = load("mail")
    sent: list[str] = []
    clients: list[httpx.AsyncClient] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content)["to"])
        return httpx.Response(200)

    real = httpx.AsyncClient

    def client(**options: Any) -> httpx.AsyncClient:  # the page's client, on a fake server
        clients.append(real(transport=httpx.MockTransport(answer), **options))
        return clients[-1]

    monkeypatch.setattr(httpx, "AsyncClient", client)  # as mail.py reaches it

    async def main() -> None:
        backend = trioqueue.MemoryBackend()
        queue = trioqueue.Queue(backend)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(mail.work, backend)
            for to in ("a@example.com", "b@example.com"):
                await queue.result((await queue.enqueue({"to": to})).id)
            assert not clients[0].is_closed  # one client, open while the pool runs
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert sent == ["a@example.com", "b@example.com"]
    assert len(clients) == 1
    assert clients[0].is_closed


@pytest.mark.parametrize("name", ["on_a_cluster", "with_a_replica", "sharded"])
def test_the_cluster_page_s_backends_run_on_a_cluster(name: str, redis_cluster: RedisCluster):
    make = getattr(load("cluster"), name)
    queue_name = "{thumbnails}" if name != "sharded" else "thumbnails"
    assert f"queue={queue_name!r}".replace("'", '"') in (EXAMPLES / "cluster.py").read_text()

    async def main() -> trioqueue.JobState | None:
        nodes = ",".join(f"127.0.0.1:{node.port}" for node in redis_cluster.masters)
        async with make(f"redis://{nodes}?cluster=yes") as backend:
            queue = trioqueue.Queue(backend)
            job_id = (await queue.enqueue({"image": "cat.png"}, id=f"cluster-page-{name}")).id
            record = await queue.status(job_id)
            await backend.purge_dead()
            return None if record is None else record.state

    assert trio.run(main) is trioqueue.JobState.RECEIVED
