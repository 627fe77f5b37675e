"""The documentation site's API reference documents every public name, and only those.

``nox -s docs`` builds the pages (warnings are errors, every reference must
resolve); these tests hold the reference to ``__all__``, so a name added to the
package without a place in the reference fails here, in the README's tests.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import trioqueue
import trioqueue.http
import trioqueue.otel

from .class_parts import own_members

REFERENCE = Path(__file__).parent.parent / "docs" / "reference"
DIRECTIVE = re.compile(
    r"^\.\. auto(?:class|function|exception|data)::\s+(\S+)$|^\.\. (?:current)?module::\s+(\S+)$",
    re.MULTILINE,
)


def documented() -> dict[str, list[str]]:
    """Each fully qualified name an ``auto*`` directive documents, with its pages."""
    found: dict[str, list[str]] = {}
    for page in sorted(REFERENCE.glob("*.rst")):
        module = "trioqueue"
        for name, switched in DIRECTIVE.findall(page.read_text()):
            if switched:
                module = switched
            else:
                found.setdefault(f"{module}.{name}", []).append(page.name)
    return found


def public() -> set[str]:
    return (
        {f"trioqueue.{name}" for name in trioqueue.__all__}
        | {f"trioqueue.http.{name}" for name in trioqueue.http.__all__}
        | {f"trioqueue.otel.{name}" for name in trioqueue.otel.__all__}
    )


def test_every_public_name_has_its_entry_in_the_reference():
    missing = sorted(public() - set(documented()))
    assert missing == [], f"add these to a page of docs/reference/: {missing}"


def test_the_reference_documents_nothing_private_and_nothing_twice():
    pages = documented()
    assert sorted(set(pages) - public()) == []
    assert {name: where for name, where in pages.items() if len(where) > 1} == {}


def test_every_reference_page_is_in_its_table_of_contents():
    index = (REFERENCE / "index.rst").read_text()
    listed = set(re.findall(r"^   (\w+)$", index, re.MULTILINE))
    assert listed == {page.stem for page in REFERENCE.glob("*.rst")} - {"index"}


def test_every_call_a_user_awaits_says_what_a_cancellation_does():
    """As Trio's own reference does, for the producer's and the pool's calls."""
    silent = []
    for owner in (trioqueue.Queue, trioqueue.WorkerPool):
        for name, value in own_members(owner).items():
            if name.startswith("_"):
                continue
            if inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value):
                doc = (inspect.getdoc(value) or "").lower()
                if "cancel" not in doc and "checkpoint" not in doc:
                    silent.append(f"{owner.__name__}.{name}")
    assert silent == []


def test_every_backend_call_says_what_a_cancellation_does():
    """Each protocol method states its rule; a backend's method keeps it or states its own.

    The site copies the protocol's paragraph into the entry of a backend method
    that keeps the rule (docs/_ext/cancellation.py), so every entry says it.
    """
    assert "Cancellation:" in (inspect.getdoc(trioqueue.Backend) or "")
    silent = []
    for name, value in vars(trioqueue.Backend).items():
        if inspect.iscoroutinefunction(value) and "Cancellation:" not in (value.__doc__ or ""):
            silent.append(f"Backend.{name}")
    for backend in (trioqueue.MemoryBackend, trioqueue.RedisBackend, trioqueue.ShardedBackend):
        assert "Cancellation: as the `Backend` protocol says" in (inspect.getdoc(backend) or "")
        for name, value in own_members(backend).items():
            if name.startswith("_") or not inspect.iscoroutinefunction(value):
                continue
            if name not in vars(trioqueue.Backend) and "Cancellation:" not in (value.__doc__ or ""):
                silent.append(f"{backend.__name__}.{name}")
    assert silent == []


def test_the_redis_backend_s_stated_figures_are_its_constants():
    """Its docstrings give private constants in words (autodoc cannot link them)."""
    from trioqueue._backends.redis import _adding, _inspecting

    package = Path(_adding.__file__).parent
    source = "".join(path.read_text() for path in sorted(package.glob("*.py")))
    wait = _adding._REPLICA_WAIT
    assert f"{wait:g} seconds) until this many replicas" in source
    assert f"Fewer replicas than wanted had the jobs within {wait:g} seconds" in source
    assert f"cancellable (at most {wait:g} seconds)" in source
    assert f"slice of {_adding._ADD_SLICE} jobs" in source
    assert f"for {_inspecting._LOOK_AGAIN:g} seconds looks at its jobs again" in source


def test_the_error_limits_the_records_state_are_the_ones_they_keep():
    """ErrorInfo's attribute docstrings give the limits in words; they must not drift."""
    from trioqueue._records import MAX_ERROR_TEXT, MAX_TRACEBACK_TEXT

    source = (Path(trioqueue.__file__).parent / "_records.py").read_text()
    assert f"cut to {MAX_ERROR_TEXT:,} characters" in source
    assert f"its last {MAX_TRACEBACK_TEXT:,} characters" in source
