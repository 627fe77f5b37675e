"""Sessions: ``nox -s tests``, ``lint``, ``typecheck``, ``docs``, ``chaos``,
``chaos_outage``, ``bench``, ``bench_peers`` and ``mutants`` (mutation testing).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests", "lint", "typecheck"]

PYPROJECT = nox.project.load_toml("pyproject.toml")


def install_group(session: nox.Session, name: str) -> None:
    """Install a PEP 735 dependency group from pyproject.toml."""
    session.install(*nox.project.dependency_groups(PYPROJECT, name))


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite against the installed package (a wheel, not the source tree)."""
    session.install(".[redis,cli,http,typed,otel]")
    install_group(session, "test")
    # Four test processes per core (pytest-xdist; worksteal evens out the few long tests):
    # most tests wait on Redis, subprocesses and real sleeps. On 2 cores, with 2,128
    # tests (HYPOTHESIS_PROFILE=ci, a quiet machine), 8 processes took 4:07, 4 took
    # 5:15 and 12 took 4:49 (the cores were saturated). With 2,286 tests and the
    # default profile, the README's command took 3:40 and 3:41 from a fresh clone
    # (2026-12-03), 2:55 of it this run.
    # The tests marked `alone` (the chaos run's recovery target is a timing one) then
    # run by themselves, with nothing beside them: sharing two cores with the others
    # would make them miss their targets, which they keep as strict as `nox -s chaos`.
    processes = str(min(4 * (os.cpu_count() or 1), 8))
    session.run(
        "pytest", *PLUGINS, "-n", processes, "--dist", "worksteal", "--alone=exclude",
        *session.posargs, env=PLUGIN_ENV,
    )  # fmt: skip
    # exit status 5: the arguments selected none of them
    session.run(
        "pytest", *PLUGINS, "--alone=only", *session.posargs, success_codes=[0, 5], env=PLUGIN_ENV
    )


# The pytest plugins the suite uses, named, with the others' autoloading off. Autoloaded,
# every installed plugin's whole package has its asserts rewritten as it is imported
# (schemathesis's hundreds of modules): 6.1 s of each test process's start against 4.2 s
# (pytest --collect-only, 2 cores, 2026-12-03), and a test run starts ten of them.
PLUGINS = [
    "-p", "pytest_trio.plugin", "-p", "xdist.plugin", "-p", "pytest_timeout",
    "-p", "_hypothesis_pytestplugin", "-p", "schemathesis.pytest.plugin",
]  # fmt: skip
PLUGIN_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff: lint (including the ASYNC rules) and formatting."""
    install_group(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into docs/_build/html: warnings are errors, and
    every reference must resolve (nitpicky), offline (docs/inventories). Graphviz's
    ``dot`` (apt ``graphviz``; CI installs it) draws the job states; without it the
    page shows the drawing's source."""
    session.install(".[redis,cli,http,typed,otel]")
    install_group(session, "docs")
    session.run(
        "sphinx-build", "-E", "-W", "--keep-going", "-n", "-b", "html", "docs", "docs/_build/html"
    )


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install(".[redis,cli,http,typed,otel]")
    install_group(session, "typecheck")
    session.run("mypy", "--strict", "trioqueue")


@nox.session
def chaos(session: nox.Session) -> None:
    """The crash tests, each with real worker processes on a private Redis; about 2 minutes.

    - ``tests/chaos.py``: 2,000 jobs with 10,000 more queued behind them, worker
      SIGKILLs, a SIGTERM, poison jobs, a Redis restart, one worker's network line held;
    - ``tests/chaos_simple.py``: the at-most-once mode under SIGKILLs and a SIGSTOP;
    - ``tests/chaos_fsync.py``: what Redis with ``appendfsync everysec`` loses when it is
      SIGKILLed, and (``--crash os``) when the machine's unsynced second is lost too.

    Each stops by itself and exits non-zero when a target is missed. Extra arguments
    go to tests/chaos.py alone (e.g. ``nox -s chaos -- --seed 3``).
    """
    session.install(".[redis,cli]")
    install_group(session, "test")
    session.run("python", "tests/chaos.py", "--deadline", "170", *session.posargs)
    session.run("python", "tests/chaos_simple.py")
    session.run("python", "tests/chaos_fsync.py", "--crash", "process")
    session.run("python", "tests/chaos_fsync.py", "--crash", "os")


@nox.session
def chaos_outage(session: nox.Session) -> None:
    """The outage test: Redis frozen (0.5-5 leases), restarted, cut off, a worker killed meanwhile.

    Two worker processes, jobs of 3 s in flight: no job lost, none run twice except
    the SIGKILLed worker's. About 2 minutes; stops by itself within 3 and exits
    non-zero on any miss. Extra arguments go to tests/chaos_outage.py
    (e.g. ``nox -s chaos_outage -- --only freeze-5x``).
    """
    session.install(".[redis,cli]")
    install_group(session, "test")
    session.run("python", "tests/chaos_outage.py", "--deadline", "170", *session.posargs)


@nox.session
def browser(session: nox.Session) -> None:
    """The dashboard in a real browser: Debian's chromium and chromium-driver, with Selenium.

    Needs the two apt packages (``.ci/run`` installs them); saves docs/dashboard.png.
    """
    session.install(".[http,cli]")
    install_group(session, "test")
    install_group(session, "browser")
    session.run("pytest", "browser_tests", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """trioqueue's own benchmarks, each against its floor, measured side by side in one run.

    Memory backend against a bare Trio channel, peak RSS after 100k and 1M jobs,
    Redis throughput and latency against a bare BLMOVE+LREM loop, and fail rate x
    capacity. Writes benchmarks/results/bench.{json,md} and the plot. About 10 minutes;
    ``nox -s bench -- --quick`` checks the script in one.
    """
    session.install(".[redis,cli,http]")
    install_group(session, "test")  # the private Redis server the tests use, and httpx
    install_group(session, "bench")
    session.run("python", "benchmarks/bench.py", *session.posargs)


@nox.session
def bench_peers(session: nox.Session) -> None:
    """trioqueue against saq, taskiq, dramatiq, arq and streaQ on one private Redis.

    Installs the peers (pinned in the ``peers`` dependency group) in this
    session's own environment. Writes benchmarks/results/peers.{json,md} and the
    plots. About 20 minutes; ``-- --rounds 1`` for a quicker look. Then delayed
    jobs' lateness beside arq's and saq's (``deferred_peers.py``, 3 rounds, about
    two minutes): benchmarks/results/deferred.{json,md}.
    """
    session.install(".[redis,cli]")
    install_group(session, "test")
    install_group(session, "bench")
    install_group(session, "peers")
    session.run("python", "benchmarks/peers.py", *session.posargs)
    session.run("python", "benchmarks/deferred_peers.py")


# `nox -s mutants`: the pure modules it mutates, and the unit tests that exercise them.
MUTATED = ["_retry", "_outcome", "_records", "_payload", "_metrics"]
MUTMUT_CONFIG = f"""
[tool.mutmut]
source_paths = ["trioqueue/"]
only_mutate = {json.dumps([f"trioqueue/{name}.py" for name in MUTATED])}
pytest_add_cli_args_test_selection = {json.dumps([f"tests/unit/test{name}.py" for name in MUTATED])}
also_copy = ["conftest.py"]
use_git_change_detection = false
"""
# The conftest.py of mutmut's working copy, loaded before tests/conftest.py.
MUTMUT_CONFTEST = """\
import os
import sys

from hypothesis import HealthCheck, settings

import trioqueue  # runs fixup_module_metadata, which the loop below partly undoes

# The same examples for every mutant, no example database; and mutmut runs the tests
# in several pytest sessions in one process, which this health check would refuse.
settings.register_profile(
    "mutmut",
    deadline=None,
    max_examples=100,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.differing_executors],
)
os.environ["HYPOTHESIS_PROFILE"] = "mutmut"  # tests/conftest.py loads the profile named here

# fixup_module_metadata sets the __module__ of public classes' methods to "trioqueue",
# mutmut's copies of them included; mutmut maps tests to functions by that module.
for module in list(sys.modules.values()):
    if getattr(module, "__name__", "").startswith("trioqueue."):
        for name, value in vars(module).items():
            if name.startswith("mutants_x") and isinstance(value, dict):
                for func in value.values():
                    getattr(func, "__func__", func).__module__ = module.__name__
"""


@nox.session
def mutants(session: nox.Session) -> None:
    """Mutation testing (mutmut) of the pure modules against their unit tests; 1-2 minutes.

    Mutates trioqueue/_retry, _outcome, _records, _payload and _metrics and runs
    tests/unit/test_{retry,outcome,records,payload,metrics}.py on each mutant, in a
    fresh copy of the tree under .nox/mutants/tmp/work (never in the source tree).
    Ends with the mutants that survived; docs/mutation.md explains each. Extra
    arguments go to ``mutmut run`` (e.g. ``nox -s mutants -- "trioqueue._retry*"``).
    """
    session.install(*PYPROJECT["project"]["dependencies"])  # not the package: mutmut's copy
    install_group(session, "mutants")
    work = Path(session.create_tmp()).resolve() / "work"
    shutil.rmtree(work, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis")
    shutil.copytree("trioqueue", work / "trioqueue", ignore=skip)
    shutil.copytree("tests", work / "tests", ignore=skip)
    (work / "pyproject.toml").write_text(Path("pyproject.toml").read_text() + MUTMUT_CONFIG)
    (work / "conftest.py").write_text(MUTMUT_CONFTEST)
    session.chdir(work)
    session.run("mutmut", "run", *session.posargs)
    session.run("mutmut", "results")
