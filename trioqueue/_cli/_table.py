"""Rows in aligned columns under a header, as ``jobs`` and ``dead list`` print them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._types import printable

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["print_table"]


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]], *, headed: bool) -> None:
    """Print *rows* in columns two spaces apart, under *header* when *headed*.

    Every cell is made `printable` (a job id or an error cannot forge a line), each
    column is as wide as its widest cell, and the last is not padded. Nothing is
    printed for no rows.
    """
    if not rows:
        return
    lines = ([list(header)] if headed else []) + [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header) - 1)]
    for line in lines:
        print(
            "  ".join([*(cell.ljust(w) for cell, w in zip(line, widths, strict=False)), line[-1]])
        )
