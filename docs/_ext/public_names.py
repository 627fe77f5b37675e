"""Let autodoc find the attribute docstrings of names re-exported from ``trioqueue``.

And let napoleon read only the docstrings that have its sections (functions,
classes, modules): an attribute's docstring starts with a phrase and a colon
("The job id: the caller's, or a fresh one"), which napoleon would take for
the attribute's type; the types come from the annotations.

The package makes its public names report ``trioqueue`` as their module (as
trio does), so autodoc looks for their attribute docstrings (the string under
each ``attrs`` field) in ``trioqueue/__init__.py``, where they are not. This
extension gives autodoc an analysis of ``trioqueue`` that holds the attribute
docstrings, annotations and source order of every private module as well.
"""

from __future__ import annotations

import pkgutil
from typing import TYPE_CHECKING

from sphinx.ext.napoleon import _process_docstring
from sphinx.pycode import ModuleAnalyzer

import trioqueue

if TYPE_CHECKING:
    from sphinx.application import Sphinx


def _merged_analysis() -> ModuleAnalyzer:
    merged = ModuleAnalyzer.for_module("trioqueue")
    merged.analyze()
    prefix = "trioqueue."
    for module in pkgutil.walk_packages(trioqueue.__path__, prefix):
        if module.name.startswith(prefix + "http") or module.name.endswith("__main__"):
            continue  # a module of its own in the reference; the command line itself
        private = ModuleAnalyzer.for_module(module.name)
        private.analyze()
        for source, target in (
            (private.attr_docs, merged.attr_docs),
            (private.annotations, merged.annotations),
            (private.tagorder, merged.tagorder),
        ):
            for key, value in source.items():
                target.setdefault(key, value)  # type: ignore[arg-type]
    return merged


def _sections_only(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    if what not in {"attribute", "data", "property"}:
        _process_docstring(app, what, name, obj, options, lines)  # type: ignore[arg-type]


def setup(app: Sphinx) -> dict[str, object]:
    """Sphinx's hook: wrap napoleon, and hand autodoc the merged analysis."""
    app.setup_extension("sphinx.ext.napoleon")
    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", _sections_only)
    ModuleAnalyzer.cache["module", "trioqueue"] = _merged_analysis()
    return {"parallel_read_safe": True}
