"""Shared fixtures: the backend factory every contract test runs on, and helpers."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

import trioqueue

if TYPE_CHECKING:
    from collections.abc import Callable

settings.register_profile("default", deadline=None, max_examples=100)
settings.register_profile("ci", deadline=None, max_examples=200, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def _memory_factory() -> Callable[..., trioqueue.Backend]:
    def make(capacity: int = 1000, retention: trioqueue.Retention | int | None = None):
        if retention is None:
            return trioqueue.MemoryBackend(capacity)
        return trioqueue.MemoryBackend(capacity, retention=retention)

    return make


@pytest.fixture(params=[pytest.param("memory", id="memory")])
def make_backend(request: pytest.FixtureRequest) -> Callable[..., trioqueue.Backend]:
    """Build a fresh, empty backend of each kind; contract tests take this fixture."""
    if request.param == "memory":
        return _memory_factory()
    raise AssertionError(f"unknown backend {request.param}")  # pragma: no cover


def collect(records: list[trioqueue.Job]) -> trioqueue.Handler:
    """A handler that appends every job it is given to *records* and returns."""

    async def handler(job: trioqueue.Job) -> None:
        records.append(job)

    return handler
