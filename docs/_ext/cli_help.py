"""The ``trioqueue-cli`` directive: the command line's reference, made from its parser.

Each command gets a section holding what its ``--help`` prints, so the page
cannot say other than the program does.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from docutils.parsers.rst import Directive

from trioqueue._cli._parser import build_parser

if TYPE_CHECKING:
    from sphinx.application import Sphinx


class CliHelp(Directive):
    """``.. trioqueue-cli::``: a section per command, with its help as a literal block."""

    def run(self) -> list[object]:
        """Insert the sections as reST; they add no nodes of their own."""
        os.environ["COLUMNS"] = "88"  # argparse wraps to the terminal's width
        parser, commands = build_parser()
        lines = ["", "trioqueue", "-" * len("trioqueue"), "", "::", ""]
        lines += ["   " + line for line in parser.format_help().splitlines()]
        for name, command in commands.items():
            title = f"trioqueue {name}"
            lines += ["", title, "-" * len(title), "", "::", ""]
            lines += ["   " + line for line in command.format_help().splitlines()]
        self.state_machine.insert_input(lines, "trioqueue-cli")
        return []


def setup(app: Sphinx) -> dict[str, object]:
    """Sphinx's hook: register the directive."""
    app.add_directive("trioqueue-cli", CliHelp)
    return {"parallel_read_safe": True}
