"""The ``trioqueue`` command line, run as a subprocess like a user would."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


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
    for word in (
        "enqueued=200",
        "processed=",
        "succeeded=",
        "failed=",
        "retries=",
        "dead_lettered=",
    ):
        assert word in out
    for name in ("queue_wait:", "handler_time:", "end_to_end:", "p50=", "p99="):
        assert name in out
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
