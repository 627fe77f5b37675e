"""Directives that describe the Redis layout from the code itself, so they cannot drift.

``.. trioqueue-redis-keys::`` is a table of a queue's keys (for the queue
``{mail}``) and what each holds, from `RedisKeys` and its field docstrings;
``.. trioqueue-lua-scripts::`` lists each Lua script with its opening comment.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from docutils.parsers.rst import Directive
from sphinx.pycode import ModuleAnalyzer

from trioqueue._backends.redis import _keys as _redis_keys
from trioqueue._backends.redis._keys import RedisKeys

if TYPE_CHECKING:
    from sphinx.application import Sphinx

LUA = Path(_redis_keys.__file__).parent / "lua"


def one_line(lines: list[str]) -> str:
    """*lines* joined, with each `name` shown as code: it may name a private one."""
    text = " ".join(line.strip() for line in lines if line.strip())
    return re.sub(r"(?<!`)`([^`]+)`(?!`)", r"``\1``", text)


class RedisKeysTable(Directive):
    """A table: each key of the queue ``{mail}``, and what it holds."""

    def run(self) -> list[object]:
        """Insert the table as reST."""
        docs = ModuleAnalyzer.for_module(_redis_keys.__name__).find_attr_docs()
        keys = RedisKeys.for_queue("{mail}")
        rows = []
        for field in attrs.fields(RedisKeys):
            value = getattr(keys, field.name)
            if not value:
                continue  # a stream source's alone
            shown = ", ".join(value) if isinstance(value, tuple) else value
            if field.name == "job_prefix":
                shown += "<id>"
            rows.append((f"``{shown}``", one_line(docs[("RedisKeys", field.name)])))
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", ""]
        lines += ["   * - key", "     - what it holds"]
        for key, meaning in rows:
            lines += [f"   * - {key}", f"     - {meaning}"]
        self.state_machine.insert_input(lines, "trioqueue-redis-keys")
        return []


class LuaScriptList(Directive):
    """A definition list: each Lua script, and its opening comment."""

    def run(self) -> list[object]:
        """Insert the list as reST."""
        lines: list[str] = []
        for script in [*sorted(LUA.glob("prelude/*.lua")), *sorted(LUA.glob("*.lua"))]:
            comment = []
            for line in script.read_text().splitlines():
                if not line.startswith("--"):
                    break
                comment.append(line.removeprefix("--").strip())
            name = script.relative_to(LUA).as_posix()
            lines += [f"``{name}``", f"   {one_line(comment)}", ""]
        self.state_machine.insert_input(lines, "trioqueue-lua-scripts")
        return []


def setup(app: Sphinx) -> dict[str, object]:
    """Sphinx's hook: register the directives."""
    app.add_directive("trioqueue-redis-keys", RedisKeysTable)
    app.add_directive("trioqueue-lua-scripts", LuaScriptList)
    return {"parallel_read_safe": True}
