"""Sphinx configuration of trioqueue's documentation: ``nox -s docs`` builds it.

The build is offline: intersphinx reads inventories from files, never the
network. Python's, trio's, attrs' and outcome's are written here from
``inventories/*.txt``, the names these pages and the docstrings point to, each
with its page on the project's own site, so the build needs no package of the
machine's (a name missing there fails the build, nitpicky, and says which).
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path
from typing import Any

import trioqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

project = "trioqueue"
author = "the trioqueue developers"
copyright = "2026, the trioqueue developers"
release = trioqueue.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "myst_parser",
    "cli_help",
    "public_names",
    "redis_layout",
    "job_states",
    "cancellation",
    "tiers",
]
graphviz_output_format = "svg"  # sharp at any size; needs the dot program (Graphviz)
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "trioqueue"

default_role = "py:obj"  # `Queue.enqueue` in a docstring is a link
nitpicky = True
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"  # the fields document themselves
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
# private types in the signatures of public names: their docs say what to pass
nitpick_ignore = [
    ("py:class", "trioqueue._backends.redis._keys.RedisKeys"),
    ("py:class", "PoolConfig"),
    ("py:class", "OutageTracker"),
    ("py:class", "ASGIApp"),  # starlette's, which has no inventory
]

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
myst_heading_anchors = 3


def _inventory(name: str) -> str:
    """Write ``_build/inventories/<name>.inv`` from ``inventories/<name>.txt``; its path.

    Each line of the text file is ``<name> <domain:role> <page>[#anchor]``;
    the anchor defaults to the name, as Sphinx writes it.
    """
    lines = []
    for line in (HERE / "inventories" / f"{name}.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        target, role, page = line.split()
        uri = page if "#" in page else f"{page}#$"
        lines.append(f"{target} {role} 1 {uri} -")
    header = (
        f"# Sphinx inventory version 2\n# Project: {name}\n# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    out = HERE / "_build" / "inventories" / f"{name}.inv"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(header.encode() + zlib.compress(("\n".join(lines) + "\n").encode()))
    return str(out)


intersphinx_mapping = {
    "python": ("https://docs.python.org/3/", _inventory("python")),
    "trio": ("https://trio.readthedocs.io/en/stable/", _inventory("trio")),
    "attrs": ("https://www.attrs.org/en/stable/", _inventory("attrs")),
    "outcome": ("https://outcome.readthedocs.io/en/latest/", _inventory("outcome")),
}


# Names the package imports for its annotations alone (under TYPE_CHECKING), so
# autodoc writes them bare: where each one lives.
_FULL_NAMES = {
    "Maybe": "outcome.Maybe",
    "ReceiveChannel": "trio.abc.ReceiveChannel",
    "AbstractAsyncContextManager": "contextlib.AbstractAsyncContextManager",
}


def _full_name(app: object, env: object, node: dict[str, str], contnode: object) -> None:
    """Point a bare name of `_FULL_NAMES` at its module, before intersphinx looks."""
    if node.get("refdomain") == "py" and node.get("reftarget") in _FULL_NAMES:
        node["reftarget"] = _FULL_NAMES[node["reftarget"]]


def setup(app: Any) -> None:
    """Sphinx's hook: resolve `_FULL_NAMES` ahead of intersphinx."""
    app.connect("missing-reference", _full_name, priority=400)
