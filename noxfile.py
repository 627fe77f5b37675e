"""Sessions: ``nox -s tests``, ``lint``, ``typecheck``, ``chaos``, ``bench`` and ``bench_peers``."""

from __future__ import annotations

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
    session.install(".[redis]")
    install_group(session, "test")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff: lint (including the ASYNC rules) and formatting."""
    install_group(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install(".[redis]")
    install_group(session, "typecheck")
    session.run("mypy", "--strict", "trioqueue")


@nox.session
def chaos(session: nox.Session) -> None:
    """The crash test: 2,000 jobs, worker SIGKILLs, a SIGTERM, poison jobs, a Redis restart.

    Stops by itself within 3 minutes; exits non-zero when a target is missed.
    Extra arguments go to tests/chaos.py (e.g. ``nox -s chaos -- --seed 3``).
    """
    session.install(".[redis]")
    install_group(session, "test")
    session.run("python", "tests/chaos.py", "--deadline", "170", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """trioqueue's own benchmarks, each against its floor, measured side by side in one run.

    Memory backend against a bare Trio channel, peak RSS after 100k and 1M jobs,
    Redis throughput and latency against a bare BLMOVE+LREM loop, and fail rate x
    capacity. Writes benchmarks/results/bench.{json,md} and the plot. About 10 minutes;
    ``nox -s bench -- --quick`` checks the script in one.
    """
    session.install(".[redis]")
    install_group(session, "test")  # the private Redis server the tests use
    install_group(session, "bench")
    session.run("python", "benchmarks/bench.py", *session.posargs)


@nox.session
def bench_peers(session: nox.Session) -> None:
    """trioqueue against saq, taskiq, dramatiq, arq and streaQ on one private Redis.

    Installs the peers (pinned in the ``peers`` dependency group) in this
    session's own environment. Writes benchmarks/results/peers.{json,md} and the
    plots. About 20 minutes; ``-- --rounds 1`` for a quicker look.
    """
    session.install(".[redis]")
    install_group(session, "test")
    install_group(session, "bench")
    install_group(session, "peers")
    session.run("python", "benchmarks/peers.py", *session.posargs)
