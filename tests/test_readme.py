"""The README's examples run as written (the Redis one on a private server).

Each is a file under ``docs/examples/readme/`` (the docs site shows them too),
and the README's block must be that file, character for character: the file is
what these tests run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FILES = ROOT / "docs" / "examples" / "readme"
NAMES = ["report", "service", "delayed", "schedules", "results", "priorities", "redis"]


def example(name: str) -> str:
    """The README's example *name*: a file its Python blocks show."""
    return (FILES / f"{name}.py").read_text()


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
        env=env,
    )  # fmt: skip


def test_the_readme_shows_each_example_file_as_it_is():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks == [example(name) for name in NAMES]
    assert sorted(path.stem for path in FILES.glob("*.py")) == sorted(NAMES)


def test_the_first_example_runs_and_prints_a_readable_report():
    result = run(example("report"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("counters: enqueued=1001, processed=1001, succeeded=1000")
    assert "conservation holds" in result.stdout
    assert lines[-1] == "dropped"


def test_the_service_example_stops_on_sigterm_with_a_report():
    process = subprocess.Popen(
        [sys.executable, "-c", example("service")], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("serving")
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert out.startswith("ShutdownReport(finished=0, cancelled=0, released=0")


def test_the_delayed_example_runs_each_job_when_due_in_due_order():
    result = run(example("delayed"))
    assert result.returncode == 0, result.stderr
    told, first, second = result.stdout.splitlines()
    assert told == "True scheduled"
    (name_1, at_1), (name_2, at_2) = (line.split(" at ") for line in (first, second))
    assert (name_1, name_2) == ("first", "second")
    assert 0.5 <= float(at_1.removesuffix(" s")) < float(at_2.removesuffix(" s"))
    assert float(at_2.removesuffix(" s")) >= 0.9  # at= counts on the wall clock: ~1 s


def test_the_schedule_example_runs_a_tick_a_second_and_names_the_next_nightly_one():
    result = run(example("schedules"))
    assert result.returncode == 0, result.stderr
    nightly, *ticks = result.stdout.splitlines()
    assert re.fullmatch(r"nightly next at \d{4}-\d\d-\d\d \d\d:00:00\+00:00", nightly)
    assert 2 <= len(ticks) <= 3  # 2.5 s of a tick a second
    assert len(set(ticks)) == len(ticks)
    assert all(re.fullmatch(r"heartbeat@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", t) for t in ticks)


def test_the_results_example_prints_each_result_and_the_waits_end():
    result = run(example("results"))
    assert result.returncode == 0, result.stderr
    first, *fanned, last = result.stdout.splitlines()
    assert first == "{'width': 160}"
    assert sorted(fanned) == [
        "thumb-1024 {'width': 256}",
        "thumb-2048 {'width': 512}",
        "thumb-800 {'width': 200}",
    ]
    assert last == "{'width': 200}"


def test_the_redis_example_runs_on_the_server_the_variable_names_and_says_which(
    redis_server: RedisServer,
):
    result = run(example("redis"), env={**os.environ, "TRIOQUEUE_REDIS_URL": redis_server.url})
    assert result.returncode == 0, result.stderr
    first, *_ = result.stdout.splitlines()
    backend = f"<trioqueue.RedisBackend reliable queue='{{mail}}' url='{redis_server.url}'>"
    assert first == f"using {backend}"
    assert "counters: enqueued=1000" in result.stdout


def test_the_priority_example_runs_the_highest_level_first():
    result = run(example("priorities"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "{2: 1, 1: 0, 0: 1, -1: 1, -2: 0}",
        "2 password reset",
        "0 thumbnail",
        "-1 weekly report",
    ]
