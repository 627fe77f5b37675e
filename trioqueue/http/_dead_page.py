"""What a page of ``GET /dead`` or ``GET /jobs`` may hold: shared with the OpenAPI document."""

from __future__ import annotations

from typing import Final

__all__ = [
    "BROWSE_DEEPEST",
    "BROWSE_FIELDS",
    "DEFAULT_BROWSE",
    "DEFAULT_PAGE",
    "MAX_BROWSE",
    "MAX_PAGE",
    "SUMMARY",
    "is_whole",
]

DEFAULT_PAGE: Final = 100
"""Dead letters a ``GET /dead`` page holds unless it asks for another ``limit``."""
MAX_PAGE: Final = 1000
"""The most dead letters one page may hold."""
SUMMARY: Final = ("id", "state", "attempts", "reason", "last_error", "updated_at", "task")
"""The fields of a dead letter that ``GET /dead?summary=true`` shows."""
DEFAULT_BROWSE: Final = 50
"""Jobs a ``GET /jobs?place=…`` page holds unless it asks for another ``limit``."""
MAX_BROWSE: Final = 500
"""The most jobs one page of ``GET /jobs?place=…`` may hold."""
BROWSE_DEEPEST: Final = 10_000
"""How deep into a place ``GET /jobs?place=…`` pages (each page lists the ids before it)."""
BROWSE_FIELDS: Final = (
    "id",
    "state",
    "attempts",
    "priority",
    "queued",
    "due_at",
    "updated_at",
    "reason",
    "task",
    "after",
    "unique_key",
    "rate_key",
)
"""The fields of each job a ``GET /jobs?place=…`` page shows."""


def is_whole(text: str) -> bool:
    """Whether *text* is a whole number in ASCII digits, of at most 12 (a page's limit, cursor)."""
    return text.isascii() and text.isdigit() and len(text) <= 12
