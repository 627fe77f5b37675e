"""The design page's table of modules by tier, made from the layering rule itself.

``.. trioqueue-tiers::`` reads ``TIERS`` from ``tests/test_layers.py`` (the test
that enforces "a module imports only from its own or lower tiers") and the first
line of each module's docstring, both without importing anything, so the table
shows the rule the tests hold and what each module says it does.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from docutils.parsers.rst import Directive
from redis_layout import one_line
from sphinx.errors import ExtensionError

if TYPE_CHECKING:
    from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[2]
RULE = ROOT / "tests" / "test_layers.py"
PACKAGE = ROOT / "trioqueue"

#: What each tier is for.
TIERS = {
    0: "errors, signals and helpers that know nothing else",
    1: "pure values and decisions, no I/O",
    2: "the backend protocol, and what goes in and out of it",
    3: "the backends",
    4: "the producer, the pool and its parts, the scheduler, the HTTP service",
    5: "the public surface and the command line",
}


def tiers() -> dict[str, int]:
    """``TIERS`` of the layering test: each module's tier."""
    for node in ast.parse(RULE.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TIERS":
            found: dict[str, int] = ast.literal_eval(node.value)
            return found
    raise ExtensionError(f"no TIERS in {RULE}")


def summary(module: str) -> str:
    """The first line of *module*'s docstring, read from its source."""
    path = PACKAGE.joinpath(*module.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if module in ("__init__", "__main__"):
        source = PACKAGE / f"{module}.py"
    doc = ast.get_docstring(ast.parse(source.read_text()))
    if not doc:
        raise ExtensionError(f"{source} has no docstring: say what the module does")
    return doc.splitlines()[0]


class TierTable(Directive):
    """A table: each tier, what it is for, its modules and what each does."""

    def run(self) -> list[object]:
        """Insert the table as reST."""
        by_tier = sorted(tiers().items(), key=lambda item: (item[1], item[0]))
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 8 30 62", ""]
        lines += ["   * - tier", "     - module", "     - what it does"]
        shown = -1
        for module, tier in by_tier:
            if tier != shown:
                lines += [f"   * - **T{tier}**", f"     - *{TIERS[tier]}*", "     -"]
                shown = tier
            text = one_line([summary(module).replace("*", r"\*")])
            lines += ["   * -", f"     - ``{module}``", f"     - {text}"]
        self.state_machine.insert_input(lines, "trioqueue-tiers")
        return []


def setup(app: Sphinx) -> dict[str, object]:
    """Register the directive."""
    app.add_directive("trioqueue-tiers", TierTable)
    return {"parallel_read_safe": True}
