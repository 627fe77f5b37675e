"""A job record as JSON, the same for the command line and the HTTP service."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from ._records import JobRecord

__all__ = ["iso_time", "record_json"]


def record_json(record: JobRecord) -> dict[str, Any]:
    r"""A record as JSON: times in ISO 8601 (UTC), and bytes that never decoded escaped.

    A record another client pushed that is not JSON has bytes for a payload: it
    shows as ``"payload": null`` with ``"payload_raw"``, the bytes as text with
    every byte that is not UTF-8 escaped (``\\xff``).
    """
    data = attrs.asdict(record)
    data["state"] = record.state.value
    for name in ("created_at", "updated_at"):
        data[name] = iso_time(data[name])
    if record.due_at is not None:
        data["due_at"] = iso_time(record.due_at)
    if isinstance(record.payload, bytes):
        data["payload"] = None
        data["payload_raw"] = record.payload.decode("utf-8", "backslashreplace")
    return data


def iso_time(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, to the nearest millisecond.

    Rounded, not cut: a due time that went through another clock and back (the
    memory backend keeps due times on Trio's clock) reads as the moment asked for,
    not a millisecond before it.
    """
    moment = datetime.datetime.fromtimestamp(round(seconds, 3), tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
