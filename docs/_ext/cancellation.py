"""Each backend method's page states what a cancellation does, as the protocol does.

The `Backend` protocol's methods each end with a "Cancellation:" paragraph. A
backend's own method that keeps the protocol's rule does not repeat it in its
docstring; this hook copies the protocol's paragraph into that method's entry in
the reference, so every call a reader looks up says it (a method with its own
"Cancellation:" paragraph keeps that one).
"""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Any

import trioqueue

if TYPE_CHECKING:
    from sphinx.application import Sphinx

BACKENDS = {"MemoryBackend", "RedisBackend", "ShardedBackend"}


def protocol_rule(method: str) -> list[str]:
    """The "Cancellation:" paragraph of `Backend.<method>`, as lines; [] if none."""
    doc = inspect.getdoc(getattr(trioqueue.Backend, method, None)) or ""
    for paragraph in re.split(r"\n\s*\n", doc):
        if paragraph.startswith("Cancellation:"):
            return paragraph.splitlines()
    return []


def add_rule(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Insert the protocol's paragraph into a backend method's entry that lacks one."""
    owner, _, method = name.removeprefix("trioqueue.").rpartition(".")
    if what != "method" or owner not in BACKENDS or any("Cancellation:" in x for x in lines):
        return
    rule = protocol_rule(method)
    if not rule:
        return
    at = next((i for i, line in enumerate(lines) if re.match(r":\w", line)), len(lines))
    lines[at:at] = [*rule, ""]


def setup(app: Sphinx) -> dict[str, object]:
    """Run after napoleon, which turns the sections into fields first."""
    app.connect("autodoc-process-docstring", add_rule, priority=600)
    return {"parallel_read_safe": True}
