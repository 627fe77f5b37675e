"""Every example of the documentation site runs, and prints what the page shows.

Each ``docs/examples/NAME.py`` is shown by a page with its output,
``NAME.out``; these tests run it and compare. The memory backend's examples run
on Trio's mock clock (their seconds-long waits pass at once); the Redis ones on
a private server, with the worker and the commands of the tutorial run as a
user runs them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry, generate_latest

import trioqueue
from trioqueue._prometheus import MetricsCollector

if TYPE_CHECKING:
    from types import ModuleType

    from .redis_server import RedisServer

EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"
ON_MEMORY = ["first_queue", "retries", "shutdown", "ingest_service", "worker_shutdown"]
ON_REDIS = ["redis_queue", "image_service"]
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


def test_every_example_is_run_here_and_shown_by_a_page():
    files = {path.stem for path in EXAMPLES.glob("*.py")}
    assert files == set(ON_MEMORY + ON_REDIS + HANDLERS + EXAMPLE_TESTS)
    pages = "".join(path.read_text() for path in (EXAMPLES.parent).rglob("*.md"))
    readme = [f"readme/{path.name}" for path in (EXAMPLES / "readme").glob("*.py")]
    assert len(readme) == 7  # run by test_readme.py
    for name in [f"{stem}.py" for stem in files] + OTHER_FILES + readme:
        assert f"examples/{name}" in pages, f"no page shows docs/examples/{name}"


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


def test_the_how_to_s_own_tests_pass_as_a_user_runs_them():
    files = [f"{name}.py" for name in EXAMPLE_TESTS]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=EXAMPLES, capture_output=True, text=True, timeout=120, check=False,
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
    assert capsys.readouterr().out == shown_output("image_service")


def test_the_redis_tutorial_runs_as_written(redis_server: RedisServer, capsys, monkeypatch):
    monkeypatch.setenv("TRIOQUEUE_REDIS_URL", redis_server.url)
    trio.run(load("redis_queue").main)
    assert capsys.readouterr().out == shown_output("redis_queue")

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
