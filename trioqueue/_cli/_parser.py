"""The command line's parser: its help layout, the shared -v/-q, and every command's arguments."""

from __future__ import annotations

import argparse
import importlib.metadata
from typing import Any, NoReturn

from ._commands_admin import (
    add_cancel,
    add_dead,
    add_enqueue,
    add_jobs,
    add_queue,
    add_result,
    add_run_now,
    add_stats,
)
from ._commands_run import add_demo, add_serve, add_worker
from ._types import printable

__all__ = ["HelpFormatter", "Parser", "build_parser"]


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless it has none or its help says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.nargs == 0  # a flag: --json, -v
            or action.default is None
            or action.default is argparse.SUPPRESS
            or "default" in text
        ):
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line: ``trioqueue COMMAND: error: ...``, exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        # --handler is not short for --handler-timeout: an option is given whole
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message)}; see `{self.prog} --help`\n")


def _add_verbosity(parser: argparse.ArgumentParser, suffix: str = "") -> None:
    """``-v`` and ``-q``; *suffix* keeps the command's own apart from those before it."""
    parser.add_argument(
        "-v", "--verbose", dest="verbose" + suffix, action="count", default=0, help="log more"
    )
    parser.add_argument(
        "-q", "--quiet", dest="quiet" + suffix, action="count", default=0, help="log less"
    )


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser, and each command's own (for errors about the command's arguments)."""
    parser = Parser(prog="trioqueue", description="A job queue for Trio.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"trioqueue {importlib.metadata.version('trioqueue')}",
    )
    _add_verbosity(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        add_demo, add_worker, add_enqueue, add_jobs, add_result, add_cancel, add_run_now,
        add_stats, add_dead, add_queue, add_serve,
    ):  # fmt: skip
        add(commands)
    for command in commands.choices.values():
        _add_verbosity(command, "_after")
    return parser, dict(commands.choices)
