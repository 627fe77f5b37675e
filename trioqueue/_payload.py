"""Canonical JSON for payloads, their hash, and fresh job ids.

A payload is any JSON value. Two payloads are the same job when their canonical
forms are equal: keys sorted, no insignificant whitespace, UTF-8. The hash of
that form is what idempotent enqueue compares.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "MAX_PAYLOAD",
    "MAX_TASK_NAME",
    "PRIORITIES",
    "canonical_json",
    "decode_payload",
    "encode_result",
    "new_job_id",
    "payload_hash",
    "reply_id",
]

MAX_TASK_NAME = 200
"""The longest task name (``enqueue(..., task=...)``), in characters."""
PRIORITIES = (2, 1, 0, -1, -2)
"""The priority levels a job may have (``enqueue(..., priority=...)``), highest first.

A claim takes the highest level that holds a job, and within one level the job
that waited longest; 0 is the default. Strict: while jobs of a higher level are
ready, none of a lower level is claimed. Five levels, because each is a list a
claim looks at on Redis (a fixed cost per claim), and five cover the usual
"urgent, high, normal, low, bulk" without a number to tune.
"""
MAX_ID_LENGTH = 256
"""The longest job id a queue accepts."""

MAX_PAYLOAD = 1 << 20
"""The most bytes a payload may take as canonical JSON, unless its `Queue` says other."""

MAX_DEPTH = 100
"""The deepest a payload may nest lists and dicts (``[[1]]`` is 2 deep).

Deeper payloads are refused at enqueue: a worker could not decode them without
running out of stack.
"""


def _check_depth(payload: Any, what: str = "the job payload") -> None:
    """Raise ValueError if *payload* nests deeper than `MAX_DEPTH` (no recursion)."""
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if depth > MAX_DEPTH:
            raise ValueError(
                f"{what} nests lists and dicts more than {MAX_DEPTH} levels deep; "
                "flatten it, or store the deep part elsewhere and send a reference"
            )
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)  # one for every call: json.dumps with these options would build one per call


def canonical_json(payload: Any, what: str = "the job payload") -> bytes:
    """Return the canonical JSON encoding of *payload* (*what* names it in errors).

    Raises:
        TypeError: *payload* is not JSON-serialisable (sets, bytes, objects, NaN),
            naming the offending type and what to send instead.
        ValueError: *payload* nests deeper than `MAX_DEPTH`, or holds a lone surrogate.
    """
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} must be JSON-serialisable (dict, list, str, int, float, bool, "
            f"None), finite numbers only; {exc}. Convert it, e.g. to a dict of plain values"
        ) from None
    except RecursionError:  # far deeper than MAX_DEPTH: say so
        _check_depth(payload, what)
        raise
    # each level takes two brackets at least: no shorter payload nests too deep
    if len(text) > 2 * MAX_DEPTH and isinstance(payload, dict | list):
        _check_depth(payload, what)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} holds a lone surrogate (half of a character, such as \\ud800 "
            "in JSON), which is not text UTF-8 can store; fix what made it, or send bytes "
            "as base64"
        ) from None


def encode_result(value: Any, limit: int) -> tuple[bytes | None, str | None]:
    """A handler's return value as canonical JSON, or why it cannot be stored.

    Returns:
        ``(encoded, None)``; ``(None, None)`` for None, which is not stored; or
        ``(None, why)`` when *value* is not JSON or its JSON is over *limit* bytes.
    """
    if value is None:
        return None, None
    try:
        encoded = canonical_json(value, "the handler's return value")
    except (TypeError, ValueError) as exc:
        return None, str(exc)
    if len(encoded) > limit:
        return None, (
            f"the handler's return value is {len(encoded)} bytes as JSON, over the pool's "
            f"max_result={limit}; return a reference to bulky results stored elsewhere, or "
            "raise max_result"
        )
    return encoded, None


def decode_payload(encoded: bytes) -> Any:
    """Decode a stored payload; ValueError for anything that is not JSON we can hold.

    Bad UTF-8, not JSON, and nesting deeper than `MAX_DEPTH` (a record written by
    another client) all raise ValueError, never RecursionError.
    """
    try:
        value = json.loads(encoded)
    except RecursionError:
        raise ValueError(
            "nested too deeply to decode (more than Python's recursion limit)"
        ) from None
    # Deeper than MAX_DEPTH decodes, but breaks whatever recurses over it later (a
    # view's JSON, a handler): refused as at enqueue. Counting brackets first keeps
    # the walk off the common case: fewer brackets than MAX_DEPTH cannot nest deeper.
    if encoded.count(b"[") + encoded.count(b"{") > MAX_DEPTH and isinstance(value, dict | list):
        _check_depth(value, "the stored value")
    return value


def payload_hash(encoded: bytes) -> str:
    """Return the hex SHA-256 of an already canonical payload encoding."""
    return hashlib.sha256(encoded).hexdigest()


def new_job_id() -> str:
    """Return a fresh random job id (32 hex characters: 128 bits from `os.urandom`)."""
    return os.urandom(16).hex()


def reply_id(job_id: str) -> str:
    """Return the id under which a pool publishes the reply of job *job_id*.

    The same job always gets the same reply id, so a job that runs twice (a
    redelivery after a crash) publishes its reply once: the second enqueue is
    deduplicated. Look a reply up with ``queue.status(reply_id(job.id))``.
    """
    candidate = f"{job_id}:reply"
    if len(candidate) <= MAX_ID_LENGTH:
        return candidate
    return "reply:" + hashlib.sha256(job_id.encode("utf-8")).hexdigest()
