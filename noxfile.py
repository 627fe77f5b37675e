"""Sessions: ``nox -s tests``, ``nox -s lint``, ``nox -s typecheck``."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = False
nox.options.sessions = ["tests", "lint", "typecheck"]

PYTHON = ["3.11", "3.12", "3.13"]


def _group(session: nox.Session, name: str) -> None:
    """Install a PEP 735 dependency group from pyproject.toml."""
    session.install(*nox.project.dependency_groups(nox.project.load_toml("pyproject.toml"), name))


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    """Run the test suite against the installed (not editable) package."""
    session.run("nox", "-s", "tests_in_venv", "--", *session.posargs, external=True)


@nox.session(name="tests_in_venv")
def tests_in_venv(session: nox.Session) -> None:
    """The test session proper, in a fresh virtualenv of the running Python."""
    session.install(".")
    _group(session, "test")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff: lint (including the ASYNC rules) and formatting."""
    _group(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install(".")
    _group(session, "typecheck")
    session.run("mypy", "--strict", "trioqueue")
