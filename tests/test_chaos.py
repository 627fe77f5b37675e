"""The short variant of ``nox -s chaos``: a crash test that must lose nothing.

400 jobs and a poison job, with 1,000 short jobs queued behind them, through 2
worker processes, while workers running jobs are SIGKILLed about every second,
one is SIGTERMed, the poison job kills each worker it reaches, Redis restarts
once and one worker's network line forwards nothing for three leases (see
``chaos.py`` for the targets it checks). One poison job, not more: with two
workers each of its deliveries takes down half the fleet, and every recovery
that one overlaps is left untimed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).with_name("chaos.py")


# A SIGKILLed worker's jobs must start again within 1.75 s (min_idle + one sweep + 0.5 s, as
# in `nox -s chaos`):
# a timing target, which two worker processes and Redis meet on two cores, but not with
# another test process beside them (2.10 s and 2.64 s seen). `nox -s tests` runs it on its
# own after the parallel run, so the target stays as strict; with `pytest -n` run it apart.
@pytest.mark.alone
def test_a_short_chaos_run_meets_every_target(tmp_path: Path):
    scratch = tmp_path / "tmp"  # the run's own temporary files go here, and must go away
    scratch.mkdir()
    result = subprocess.run(
        [
            sys.executable, str(CHAOS), "--jobs", "400", "--backlog", "1000", "--poison", "1",
            "--workers", "2",
            "--concurrency", "4", "--deadline", "90", "--seed", "7",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TMPDIR": str(scratch)},
    )  # fmt: skip
    assert result.stdout, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["misses"] == [], report
    assert result.returncode == 0, report
    assert report["lost"] == 0, report
    assert report["sigkills"] >= 3, report  # the faults did happen
    assert (report["sigterms"], report["redis_restarts"]) == (1, 1), report
    assert report["line_held_s"] >= 3.0, report
    assert report["running_when_held"] >= 1, report  # the hold caught running handlers
    assert report["run_twice_after_the_held_line"] >= 1, report
    assert report["crashes_by_poison"] >= 2, report
    assert list(scratch.iterdir()) == []  # no logs, no Redis data left behind
