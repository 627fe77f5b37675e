"""A test run started with SIGINT ignored still gives the processes it starts their Ctrl-C.

A shell runs a background job (``nox -s tests &``, a CI script) with SIGINT
ignored, and a child inherits that across exec; the CLI tests that interrupt a
producer would then wait for it in vain (issue 36).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent

# Loads tests/conftest.py as pytest does, then asks a child how it would take SIGINT.
RUN_AS_PYTEST_WOULD = f"""
import importlib, signal, subprocess, sys
sys.path.insert(0, {str(TESTS.parent)!r})
importlib.import_module("tests.conftest")
child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip())
"""

IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-c', sys.argv[1]])"
)


def test_a_process_the_tests_start_takes_sigint_though_the_run_ignores_it():
    result = subprocess.run(
        [sys.executable, "-c", IGNORING_SIGINT, RUN_AS_PYTEST_WOULD],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "True", result.stderr
