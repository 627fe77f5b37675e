"""What a page of ``GET /dead`` may hold: shared by the endpoint and its OpenAPI document."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "SUMMARY"]

DEFAULT_PAGE: Final = 100
"""Dead letters a ``GET /dead`` page holds unless it asks for another ``limit``."""
MAX_PAGE: Final = 1000
"""The most dead letters one page may hold."""
SUMMARY: Final = ("id", "state", "attempts", "reason", "last_error", "updated_at", "task")
"""The fields of a dead letter that ``GET /dead?summary=true`` shows."""
