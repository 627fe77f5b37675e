"""The parts the HTTP service's OpenAPI document is made of: its schemas and common answers."""

from __future__ import annotations

from typing import Any

from .._job_checks import MAX_AFTER, MAX_HEADERS, MAX_HEADERS_BYTES
from .._payload import MAX_ID_LENGTH, MAX_TASK_NAME, PRIORITIES
from .._records import JobState
from .._util import MAX_DELAY
from ._dead_page import SUMMARY

__all__ = [
    "ADMIN",
    "BAD_HOST",
    "CANCEL",
    "DEAD_SUMMARY",
    "ERROR",
    "NEW_JOB",
    "NOT_JSON",
    "READ",
    "RECEIPT",
    "RECORD",
    "UNAVAILABLE",
    "WRITE",
    "error_answer",
    "json_answer",
]


ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "What kind of error, for programs."},
        "message": {"type": "string", "description": "What happened and what to do."},
    },
}


RECEIPT: dict[str, Any] = {
    "type": "object",
    "required": ["id", "deduplicated", "queued"],
    "properties": {
        "id": {"type": "string"},
        "deduplicated": {"type": "boolean"},
        "queued": {"type": "boolean", "description": "On the ready queue now."},
        "scheduled": {
            "type": "boolean",
            "description": "Stored until its due time (a delay or an at was given).",
        },
        "deferred": {
            "type": "boolean",
            "description": "Waiting for the jobs it runs after (after was given) to complete.",
        },
        "state": {
            "type": "string",
            "enum": [state.value for state in JobState],
            "description": "The state of a job this request added (absent for one found "
            "already there: its record has it): 'failed' for one that became a dead "
            "letter at once, a job it runs after having failed, been dropped or "
            "cancelled.",
        },
    },
}


RECORD: dict[str, Any] = {
    "type": "object",
    "required": ["id", "state", "queued", "attempts", "payload_hash", "created_at"],
    "properties": {
        "id": {"type": "string"},
        "state": {
            "enum": [
                "received",
                "scheduled",
                "deferred",
                "processing",
                "completed",
                "failed_retry",
                "failed",
                "dropped",
                "cancelled",
            ]
        },
        "queued": {"type": "boolean"},
        "attempts": {"type": "integer", "minimum": 0},
        "payload": {},
        "payload_hash": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"},
        "updated_at": {"type": "string", "format": "date-time"},
        "due_at": {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "When a scheduled job becomes ready; null for any other.",
        },
        "payload_raw": {
            "type": "string",
            "description": "Bytes another program stored that are not JSON (payload is null).",
        },
        "last_error": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string"},
                        "message": {"type": "string"},
                        "traceback": {"type": "string"},
                        "attempt": {
                            "type": ["integer", "null"],
                            "description": "The attempt it ended: for a completed job, an "
                            "earlier one than its last.",
                        },
                    },
                },
            ]
        },
        "reason": {"type": ["string", "null"]},
        "priority": {"type": "integer", "minimum": PRIORITIES[-1], "maximum": PRIORITIES[0]},
        "result": {"description": "What the handler of a completed job returned (JSON)."},
        "progress": {
            "description": "What the job's handler last reported (JSON; null until it does)."
        },
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "The metadata its producer gave the job.",
        },
        "result_error": {
            "type": ["string", "null"],
            "description": "Why a completed job's return value was not stored.",
        },
        "after": {
            "type": "array",
            "items": {"type": "string"},
            "description": "The ids of the jobs it was enqueued to run after.",
        },
        "unique_key": {
            "type": ["string", "null"],
            "description": "The key no other job held while this one waited or ran.",
        },
        "rate_key": {
            "type": ["string", "null"],
            "description": "The key whose rate limit its starts count against.",
        },
        "deduplicated": {"type": "boolean"},
        "task": {
            "type": ["string", "null"],
            "description": "The handler the job asks for, in a pool of several; null for any.",
        },
    },
}


DEAD_SUMMARY: dict[str, Any] = {
    "type": "object",
    "description": "A dead letter without its payload, result or traceback (summary=true).",
    "required": list(SUMMARY),
    "additionalProperties": False,
    "properties": {name: RECORD["properties"].get(name, {}) for name in SUMMARY},
}


def json_answer(schema: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema}},
        **extra,
    }


def error_answer(description: str) -> dict[str, Any]:
    return json_answer({"$ref": "#/components/schemas/Error"}, description)


NEW_JOB: dict[str, Any] = {
    "type": "object",
    "required": ["payload"],
    "additionalProperties": False,
    "properties": {
        "id": {
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": MAX_ID_LENGTH,
            "description": "The job's id, for idempotent ingest; null or absent for a fresh one.",
        },
        "payload": {"description": "Any JSON value."},
        "delay": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": MAX_DELAY,
            "description": "Seconds until the job is due: it is stored, scheduled, until then "
            "(at most 100 years).",
        },
        "at": {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "When the job is due, ISO 8601 with its zone, at most 100 years "
            "ahead; not with delay.",
        },
        "max_attempts": {
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "The attempts this job gets, over the workers' retry policy.",
        },
        "handler_timeout": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": MAX_DELAY,
            "description": "Seconds one attempt of this job may run, over the workers' own.",
        },
        "task": {
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": MAX_TASK_NAME,
            "description": "Which handler runs the job, in a worker given several by name.",
        },
        "priority": {
            "type": ["integer", "null"],
            "minimum": PRIORITIES[-1],
            "maximum": PRIORITIES[0],
            "description": "The job's level: workers take the highest first (null or absent: 0).",
        },
        "headers": {
            "type": ["object", "null"],
            "additionalProperties": {"type": "string"},
            "maxProperties": MAX_HEADERS,
            "description": "Metadata for the job (trace context, a tenant): names and values "
            f"are text, at most {MAX_HEADERS} of them and {MAX_HEADERS_BYTES:,} bytes in all.",
        },
        "after": {
            "type": ["array", "null"],
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH},
            "maxItems": MAX_AFTER,
            "description": "The ids of jobs this one runs after: it waits (deferred) until "
            "they all complete, and becomes a dead letter if one of them does not. Not with "
            "delay or at.",
        },
        "unique_key": {
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": MAX_ID_LENGTH,
            "description": "While a job with this key waits or runs, no other is stored: the "
            "answer is that job's (200, deduplicated, its id).",
        },
        "debounce": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": MAX_DELAY,
            "description": "With unique_key: the job is due this many seconds from now, and "
            "a newer one with the key and a debounce replaces it until then.",
        },
        "rate_key": {
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": MAX_ID_LENGTH,
            "description": "Whom its starts count against under the queue's per-key rate "
            "limit (e.g. a customer's id): over it, the job waits (scheduled) for its turn.",
        },
    },
}


CANCEL: dict[str, Any] = {
    "type": "object",
    "required": ["id", "cancel", "state"],
    "properties": {
        "id": {"type": "string"},
        "cancel": {"enum": ["cancelled", "requested"]},
        "state": {"type": "string"},
        "message": {"type": "string"},
    },
}


ADMIN: dict[str, Any] = {
    "401": error_answer("No admin token, or the wrong one."),
    "403": error_answer("The service was started without an admin token: this is off."),
}


READ: dict[str, Any] = {
    "401": error_answer("The service has a token, and this read came without it (or another)."),
}


WRITE: dict[str, Any] = {
    "401": error_answer(
        "The service has a token, and this request came without one (or with another): "
        "nothing was stored or looked up."
    ),
    "403": error_answer(
        "The service has no token, and a job uses a field that acts on other jobs "
        "(unique_key, debounce, after, rate_key, headers, priority): nothing was stored."
    ),
}


NOT_JSON: dict[str, Any] = {
    "415": error_answer("The body is not declared JSON: send Content-Type: application/json."),
}


BAD_HOST = error_answer(
    "The Host header names a host this service does not answer to (--allowed-host)."
)


UNAVAILABLE = json_answer(
    {"$ref": "#/components/schemas/Error"},
    "The backend cannot be reached, or the request took too long; nothing was stored. "
    "Send it again after Retry-After seconds (with the same id, it is stored once).",
    headers={"Retry-After": {"schema": {"type": "string"}}},
)
