"""The public API: exactly the expected names, documented, and homed in ``trioqueue``."""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
from pathlib import Path

import pytest

import trioqueue

from .class_parts import own_members

EXPECTED = {
    "PLACES",
    "PRIORITIES",
    "AddMode",
    "Backend",
    "BackendOutOfMemory",
    "BackendRefused",
    "BackendUnavailable",
    "CancelResult",
    "Claim",
    "ConfigurationError",
    "DependencyNotFound",
    "Drop",
    "ErrorInfo",
    "Gauges",
    "Handler",
    "Handlers",
    "HistogramSnapshot",
    "IdempotencyConflict",
    "InvalidTransition",
    "Job",
    "JobCancelled",
    "JobDropped",
    "JobFailed",
    "JobNotFound",
    "NoResult",
    "ResultNotStored",
    "JobOptions",
    "JobRecord",
    "JobState",
    "MemoryBackend",
    "MemoryFull",
    "Metrics",
    "MetricsSnapshot",
    "Middleware",
    "MissedTicks",
    "NewJob",
    "Queue",
    "QueueFull",
    "QueueInfo",
    "QueueSettings",
    "ShardedBackend",
    "StreamSource",
    "RateLimit",
    "RateLimits",
    "Receipt",
    "Renewal",
    "AddResult",
    "RedisBackend",
    "Retention",
    "Retry",
    "RetryPolicy",
    "Schedule",
    "Scheduler",
    "ShutdownReport",
    "SweepReport",
    "Task",
    "TrioqueueError",
    "UnknownTask",
    "WorkerPool",
    "current_backend",
    "current_redis",
    "dispatch",
    "open_scheduler",
    "open_worker_pool",
    "reply_id",
    "report_progress",
    "task",
}

# Exported names that are type aliases: they cannot carry a runtime docstring or
# module, so they must be documented in the source (a string right after the alias).
TYPE_ALIASES = {"AddResult", "Handler", "Handlers", "Middleware"}
CONSTANTS = {"PLACES", "PRIORITIES"}  # documented where assigned, as the type aliases are

PUBLIC = sorted(trioqueue.__all__)
PACKAGE_DIR = Path(trioqueue.__file__).parent


def _attribute_docstrings() -> dict[str, str]:
    """Module-level ``NAME = ...`` followed by a string literal, across the package."""
    found: dict[str, str] = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for node, following in itertools.pairwise(body):
            if (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = following.value.value
    return found


def test_all_is_exactly_the_expected_names():
    assert set(trioqueue.__all__) == EXPECTED


def test_all_has_no_duplicates():
    assert len(trioqueue.__all__) == len(set(trioqueue.__all__))


def test_all_is_sorted():
    """In ruff's order (RUF022): constants, then classes, then functions; each sorted."""

    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2), name

    assert list(trioqueue.__all__) == sorted(trioqueue.__all__, key=kind)


def test_all_has_no_private_names():
    assert [name for name in trioqueue.__all__ if name.startswith("_")] == []


def test_dir_shows_exactly_all():
    """What a user browsing the package sees (``dir``, completion): the public names,
    not the ``__future__`` import nor the private modules."""
    shown = {name for name in dir(trioqueue) if not name.startswith("__")}
    assert shown == EXPECTED
    for name in ("trioqueue.http", "trioqueue.otel"):
        module = importlib.import_module(name)
        assert {n for n in dir(module) if not n.startswith("__")} == set(module.__all__), name


def test_star_import_gives_exactly_all():
    namespace: dict[str, object] = {}
    exec("from trioqueue import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == EXPECTED


@pytest.mark.parametrize("name", PUBLIC)
def test_name_exists(name):
    assert hasattr(trioqueue, name)


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - TYPE_ALIASES - CONSTANTS))
def test_is_class_or_function(name):
    obj = getattr(trioqueue, name)
    assert inspect.isclass(obj) or inspect.isfunction(obj), f"{name} is {type(obj)}"


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - TYPE_ALIASES - CONSTANTS))
def test_has_docstring(name):
    doc = inspect.getdoc(getattr(trioqueue, name))
    assert doc, f"trioqueue.{name} has no docstring"
    assert doc.strip()


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - TYPE_ALIASES - CONSTANTS))
def test_own_docstring_not_inherited(name):
    obj = getattr(trioqueue, name)
    assert obj.__doc__, f"trioqueue.{name} has no docstring of its own"


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - TYPE_ALIASES - CONSTANTS))
def test_reports_public_module(name):
    obj = getattr(trioqueue, name)
    assert obj.__module__ == "trioqueue"
    assert obj.__qualname__ == name


@pytest.mark.parametrize("name", sorted(TYPE_ALIASES | CONSTANTS))
def test_type_alias_documented_in_source(name):
    assert name in trioqueue.__all__
    docs = _attribute_docstrings()
    assert docs.get(name, "").strip(), f"type alias {name} has no docstring in the source"


def test_public_methods_report_public_module():
    for name in sorted(set(PUBLIC) - TYPE_ALIASES - CONSTANTS):
        obj = getattr(trioqueue, name)
        if not inspect.isclass(obj):
            continue
        for attr, value in own_members(obj).items():
            if attr.startswith("_") or not inspect.isfunction(value):
                continue
            assert value.__module__ == "trioqueue", f"{name}.{attr}"
            assert value.__qualname__ == f"{name}.{attr}"


def test_version():
    assert isinstance(trioqueue.__version__, str)
    assert trioqueue.__version__
