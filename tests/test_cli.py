"""The ``trioqueue`` command line, run as a subprocess like a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import trioqueue


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trioqueue", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_prints_every_counter_and_a_holding_conservation_law():
    result = run(
        "demo", "--jobs", "200", "--fail-rate", "0.3", "--max-attempts", "2", "--seed", "3"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    counters = {
        name: int(value)
        for name, value in re.findall(r"(\w+)=(\d+)(?=[,\n])", out.partition("gauges:")[0])
    }
    assert set(counters) >= {"enqueued", "processed", "succeeded", "failed", "retries"}
    assert counters["enqueued"] == 200
    # every attempt succeeded or failed; every failure was retried or was the last one
    assert counters["processed"] == counters["succeeded"] + counters["failed"]
    assert counters["failed"] == counters["retries"] + counters["dead_lettered"]
    assert counters["succeeded"] + counters["dead_lettered"] == 200
    assert 0 < counters["dead_lettered"] < counters["retries"]  # 0.3 fails, twice: about 9 %
    for name in ("queue_wait:", "handler_time:", "end_to_end:"):
        assert re.search(rf"{name} +p50=[\d.]+ms p90=[\d.]+ms p99=[\d.]+ms", out), name
    assert "conservation holds" in out


def test_demo_json_report_accounts_for_every_job():
    result = run(
        "demo",
        "--jobs",
        "150",
        "--fail-rate",
        "0.5",
        "--max-attempts",
        "2",
        "--workers",
        "3",
        "--capacity",
        "1",
        "--handler-ms",
        "0",
        "--seed",
        "5",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["enqueued"] == 150
    assert report["succeeded"] + report["dead_lettered"] == 150
    assert report["dead_lettered"] > 0  # at fail-rate 0.5 with two attempts, some exhaust
    assert report["processed"] == report["succeeded"] + report["failed"]
    assert report["conserved"] is True
    assert report["gauges"]["queue_depth"] == 0


def test_demo_with_the_same_seed_gives_the_same_counters():
    args = ("demo", "--jobs", "300", "--fail-rate", "0.4", "--max-attempts", "2")
    args += ("--workers", "8", "--handler-ms", "0", "--seed", "11", "--json")
    counters = ("succeeded", "failed", "retries", "dead_lettered")
    reports = []
    for _ in range(3):
        result = run(*args)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        reports.append({name: report[name] for name in counters})
    assert reports[0]["dead_lettered"] > 0
    assert reports[1] == reports[0]
    assert reports[2] == reports[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "too small"),
        (["--jobs", "ten"], "not a whole number"),
        (["--fail-rate", "1.5"], "out of range"),
        (["--capacity", "-3"], "too small"),
        (["--handler-ms", "-1"], "negative"),
    ],
)
def test_demo_bad_input_is_a_one_line_error_without_traceback(args, message):
    result = run("demo", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_without_a_terminal_the_demo_prints_plain_progress_lines():
    result = run("demo", "--jobs", "300", "--workers", "2", "--handler-ms", "10", "--seed", "1")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert lines, result.stderr
    assert "/300 finished (" in lines[0]
    assert "\r" not in result.stderr  # no bar redrawn in place


def test_on_a_terminal_the_demo_draws_a_progress_bar_with_rates():
    import os
    import pty
    import threading

    leader, follower = pty.openpty()
    drawn: list[bytes] = []

    def read_the_terminal() -> None:  # as it is written: a full terminal would block
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                return
            if not chunk:
                return
            drawn.append(chunk)

    reader = threading.Thread(target=read_the_terminal)
    reader.start()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "trioqueue", "demo", "--jobs", "300", "--handler-ms", "2"],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
        )
        os.close(follower)
        stdout, _ = process.communicate(timeout=120)
        reader.join(timeout=10)
    finally:
        os.close(leader)
    assert process.returncode == 0
    assert "conservation holds" in stdout
    text = b"".join(drawn).decode(errors="replace")
    assert "300/300" in text
    assert "job/s" in text  # the bar shows the rate
    assert "progress: " not in text


@pytest.mark.parametrize(
    ("flags", "shown", "hidden"),
    [
        ([], [], ["retrying in", "completed on attempt"]),
        (["-v"], ["retrying in"], ["completed on attempt"]),
        (["-vv"], ["retrying in", "completed on attempt"], []),
    ],
)
def test_verbosity_flags_choose_which_job_outcomes_are_logged(flags, shown, hidden):
    result = run(*flags, "demo", "--jobs", "50", "--fail-rate", "0.5", "--seed", "4", "--json")
    assert result.returncode == 0, result.stderr
    for text in shown:
        assert text in result.stderr
    for text in hidden:
        assert text not in result.stderr


def test_verbosity_flags_work_after_the_command_too():
    result = run("demo", "--jobs", "50", "--fail-rate", "0.5", "--seed", "4", "--json", "-v")
    assert result.returncode == 0, result.stderr
    assert "retrying in" in result.stderr
    assert "completed on attempt" not in result.stderr
    both = run("-v", "demo", "--jobs", "50", "--fail-rate", "0.5", "--seed", "4", "--json", "-v")
    assert "completed on attempt" in both.stderr  # -v before and -v after: -vv


def test_version():
    from trioqueue import __version__

    result = run("--version")
    assert (result.returncode, result.stdout) == (0, f"trioqueue {__version__}\n")


def test_help_shows_the_defaults():
    import inspect

    from trioqueue import open_worker_pool

    library = inspect.signature(open_worker_pool).parameters["workers"].default
    demo = run("demo", "--help").stdout
    assert "(default: 1000)" in demo  # --jobs
    assert f"concurrent handlers (default: {library})" in demo
    assert "(default: a random one)" in demo  # --seed
    worker = subprocess.run(
        [sys.executable, "-m", "trioqueue", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "1000"},
    ).stdout
    assert f"concurrent handlers (default: {library})" in worker
    retry = trioqueue.RetryPolicy()
    assert f"attempts per job, the first included (default: {retry.max_attempts})" in worker
    assert f"doubling per failure (default: {retry.base_delay})" in worker
    assert "(default: None)" not in worker
    assert "(default: False)" not in worker


@pytest.mark.parametrize(
    ("args", "prefix", "message"),
    [
        (["demo", "--jobs", "0"], "trioqueue demo: error: ", "argument --jobs: 0 is too small"),
        (["demo", "--bogus"], "trioqueue demo: error: ", "unrecognized arguments: --bogus"),
        (["dead", "lst"], "trioqueue dead: error: ", "invalid choice: 'lst'"),
        (["stats", "--interval"], "trioqueue stats: error: ", "expected one argument"),
        ([], "trioqueue: error: ", "required: COMMAND"),
        (["nope"], "trioqueue: error: ", "invalid choice: 'nope'"),
    ],
)
def test_usage_errors_are_one_line_with_the_command_and_exit_status_2(args, prefix, message):
    result = run(*args)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(prefix)
    assert message in result.stderr
    assert "--help`" in result.stderr  # where to look


def test_printable_escapes_control_characters_and_leaves_the_rest_alone():
    from trioqueue._cli._types import printable

    assert printable("a\x1b[31m\nb\tc\rd\x00\x7f\x85\x9b") == (
        "a\\x1b[31m\\nb\\tc\\rd\\x00\\x7f\\x85\\x9b"
    )
    assert printable("\u202eevil\u2028x\u2066") == "\\u202eevil\\u2028x\\u2066"
    unchanged = "caf\u00e9 \u6f22\u5b57 \U0001f389 \\ 'single' \"double\" \u00a0~"
    assert printable(unchanged) == unchanged
    assert printable(None) == "None"


def without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line as if *module* (an optional dependency) were not installed."""
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from trioqueue._cli._main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).parent,  # where the handlers module is
    )


def test_the_demo_runs_without_the_cli_extra():
    result = without("tqdm", "demo", "--jobs", "50", "--fail-rate", "0.2", "--seed", "1")
    assert result.returncode == 0, result.stderr
    assert "conservation holds" in result.stdout


def test_python_m_does_not_import_what_the_current_directory_shadows(tmp_path):
    # python -m puts the current directory first on sys.path; a tqdm.py there must not
    # stand in for the installed tqdm the demo imports
    (tmp_path / "tqdm.py").write_text("raise RuntimeError('the tqdm.py of the directory')\n")
    result = subprocess.run(
        [sys.executable, "-m", "trioqueue", "demo", "--jobs", "5", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "conservation holds" in result.stdout


def test_metrics_without_the_cli_extra_is_refused_with_the_fix_before_starting():
    result = without(
        "prometheus_client",
        "worker", "cli_handlers:record", "--redis", "redis://127.0.0.1:1/0", "--queue", "{q}",
        "--metrics-port", "19999",
    )  # fmt: skip
    assert result.returncode == 2
    assert "pip install 'trioqueue[cli]'" in result.stderr
    assert "worker on" not in result.stderr  # refused, not started


@pytest.mark.parametrize(
    ("bind", "message"),
    [
        ("0.0.0.0:99999", "the port must be a number from 1 to 65535"),
        ("127.0.0.1:0", "the port must be a number from 1 to 65535"),
        ("localhost", "is not HOST:PORT"),
        (":8000", "is not HOST:PORT"),
        ("::1:8000", "put an IPv6 address in brackets, e.g. [::1]:8000"),
    ],
)
def test_serve_with_a_bad_bind_is_a_one_line_error(bind, message):
    result = run("serve", "--bind", bind)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("trioqueue serve: error: argument --bind")
    assert message in line
    assert "Traceback" not in result.stderr
