"""Job records and receipts as the JSON the HTTP service answers with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._backend import Receipt
    from .._records import JobRecord

__all__ = ["receipt_json", "record_json"]


def record_json(record: JobRecord) -> dict[str, Any]:
    """*record* as JSON: every field, the state as its name, the error with its traceback.

    A payload kept as raw bytes (another program's record that is not JSON) is
    shown as text, with undecodable bytes escaped.
    """
    error = record.last_error
    payload = record.payload
    if isinstance(payload, bytes):
        payload = payload.decode(errors="backslashreplace")
    return {
        "id": record.id,
        "state": record.state.value,
        "queued": record.queued,
        "attempts": record.attempts,
        "payload": payload,
        "payload_hash": record.payload_hash,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "last_error": None
        if error is None
        else {"type": error.type, "message": error.message, "traceback": error.traceback},
        "reason": record.reason,
    }


def receipt_json(receipt: Receipt) -> dict[str, Any]:
    """What an enqueue did, as JSON."""
    return {"id": receipt.id, "deduplicated": receipt.deduplicated, "queued": receipt.queued}
