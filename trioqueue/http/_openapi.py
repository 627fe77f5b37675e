"""The HTTP service's OpenAPI 3.1 document, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from .._payload import MAX_ID_LENGTH, MAX_TASK_NAME, PRIORITIES
from .._util import MAX_DELAY
from ._dead_page import DEFAULT_PAGE, MAX_PAGE, SUMMARY

__all__ = ["openapi_document"]

_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "What kind of error, for programs."},
        "message": {"type": "string", "description": "What happened and what to do."},
    },
}
_RECEIPT: dict[str, Any] = {
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
    },
}
_RECORD: dict[str, Any] = {
    "type": "object",
    "required": ["id", "state", "queued", "attempts", "payload_hash", "created_at"],
    "properties": {
        "id": {"type": "string"},
        "state": {
            "enum": [
                "received",
                "scheduled",
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
                    },
                },
            ]
        },
        "reason": {"type": ["string", "null"]},
        "priority": {"type": "integer", "minimum": PRIORITIES[-1], "maximum": PRIORITIES[0]},
        "result": {"description": "What the handler of a completed job returned (JSON)."},
        "result_error": {
            "type": ["string", "null"],
            "description": "Why a completed job's return value was not stored.",
        },
        "deduplicated": {"type": "boolean"},
        "task": {
            "type": ["string", "null"],
            "description": "The handler the job asks for, in a pool of several; null for any.",
        },
    },
}


_DEAD_SUMMARY: dict[str, Any] = {
    "type": "object",
    "description": "A dead letter without its payload, result or traceback (summary=true).",
    "required": list(SUMMARY),
    "additionalProperties": False,
    "properties": {name: _RECORD["properties"].get(name, {}) for name in SUMMARY},
}


def _json(schema: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema}},
        **extra,
    }


def _error(description: str) -> dict[str, Any]:
    return _json({"$ref": "#/components/schemas/Error"}, description)


_NEW_JOB: dict[str, Any] = {
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
    },
}
_CANCEL: dict[str, Any] = {
    "type": "object",
    "required": ["id", "cancel", "state"],
    "properties": {
        "id": {"type": "string"},
        "cancel": {"enum": ["cancelled", "requested"]},
        "state": {"type": "string"},
        "message": {"type": "string"},
    },
}
_ADMIN: dict[str, Any] = {
    "401": _error("No admin token, or the wrong one."),
    "403": _error("The service was started without an admin token: this is off."),
}

_READ: dict[str, Any] = {
    "401": _error("The service has a token, and this read came without it (or another)."),
}
_NOT_JSON: dict[str, Any] = {
    "415": _error("The body is not declared JSON: send Content-Type: application/json."),
}
_BAD_HOST = _error("The Host header names a host this service does not answer to (--allowed-host).")

_UNAVAILABLE = _json(
    {"$ref": "#/components/schemas/Error"},
    "The backend cannot be reached, or the request took too long; nothing was stored. "
    "Send it again after Retry-After seconds (with the same id, it is stored once).",
    headers={"Retry-After": {"schema": {"type": "string"}}},
)


def openapi_document(max_body: int) -> dict[str, Any]:
    """The document, with this service's body limit in it."""
    job_id = {
        "name": "job_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH},
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "trioqueue",
            "version": "1",
            "description": "Ingest jobs into a trioqueue backend and look them up.",
        },
        "paths": {
            "/jobs": {
                "post": {
                    "summary": "Store a job (idempotent by id)",
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": False,
                            "description": "The job's id, when the body gives none.",
                            "schema": {"type": "string", "minLength": 1, "maxLength": 256},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/NewJob"}}
                        },
                    },
                    "responses": {
                        "201": _json(
                            {"$ref": "#/components/schemas/Receipt"},
                            "Stored and scheduled (on the ready queue).",
                            headers={"Location": {"schema": {"type": "string"}}},
                        ),
                        "202": _json(
                            {"$ref": "#/components/schemas/Receipt"},
                            "Stored but not on the ready queue (queued is false): the queue is "
                            "full, and it goes on as soon as room frees; or it was given a "
                            "delay or an at (scheduled is true), and goes on when due.",
                            headers={"Location": {"schema": {"type": "string"}}},
                        ),
                        "200": _json(
                            {
                                "anyOf": [
                                    {"$ref": "#/components/schemas/Record"},
                                    {"$ref": "#/components/schemas/Receipt"},
                                ]
                            },
                            "The same id with the same payload exists: its record (its "
                            "receipt to a client without the token of a service that has "
                            "one), deduplicated; nothing new was stored.",
                        ),
                        "400": _error(
                            "Bad JSON, a bad id or payload, or a Host this service does not "
                            "answer to; the message says which."
                        ),
                        **_NOT_JSON,
                        "409": _json(
                            {
                                "allOf": [
                                    {"$ref": "#/components/schemas/Error"},
                                    {
                                        "type": "object",
                                        "properties": {
                                            "id": {"type": "string"},
                                            "stored_hash": {"type": "string"},
                                            "new_hash": {"type": "string"},
                                        },
                                    },
                                ]
                            },
                            "The id exists with another payload; the stored job is unchanged.",
                        ),
                        "413": _error(
                            f"The body is over {max_body:,} bytes, or (too_large) the job "
                            "alone is larger than a queue in memory may hold (--max-memory)."
                        ),
                        "503": _UNAVAILABLE,
                    },
                }
            },
            "/jobs/batch": {
                "post": {
                    "summary": "Store many jobs; all are checked before any is stored",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["jobs"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "jobs": {
                                            "type": "array",
                                            "minItems": 1,
                                            "maxItems": 10_000,
                                            "items": {"$ref": "#/components/schemas/NewJob"},
                                        }
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "results": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["status", "id"],
                                            "properties": {
                                                "status": {"enum": [200, 201, 202, 409, 503]},
                                                "id": {"type": "string"},
                                            },
                                        },
                                    }
                                },
                            },
                            "One result per job, in order, each with the status POST /jobs "
                            "would have answered.",
                        ),
                        "400": _error(
                            "A bad job (its place is named), or a Host this service does not "
                            "answer to; nothing was stored."
                        ),
                        **_NOT_JSON,
                        "413": _error(f"The body is over {max_body:,} bytes."),
                        "503": _UNAVAILABLE,
                    },
                }
            },
            "/dead": {
                "get": {
                    "summary": "A page of the dead letters, oldest first (the token, if the "
                    "service has one)",
                    "security": [{}, {"admin": []}],
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "description": f"Dead letters on the page ({DEFAULT_PAGE} unless "
                            "given).",
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
                        },
                        {
                            "name": "cursor",
                            "in": "query",
                            "required": False,
                            "description": "The next of the page before; none for the first.",
                            "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"},
                        },
                        {
                            "name": "summary",
                            "in": "query",
                            "required": False,
                            "description": "true: each letter without its payload and result.",
                            "schema": {"type": "boolean"},
                        },
                    ],
                    "responses": {
                        **_READ,
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["dead", "next"],
                                "properties": {
                                    "dead": {
                                        "type": "array",
                                        "items": {
                                            "anyOf": [
                                                {"$ref": "#/components/schemas/Record"},
                                                _DEAD_SUMMARY,
                                            ]
                                        },
                                    },
                                    "next": {
                                        "type": ["string", "null"],
                                        "description": "The cursor of the next page; null on "
                                        "the last.",
                                    },
                                },
                            },
                            "A page of dead letters, whole or summed up.",
                        ),
                        "400": _error(
                            "A limit, cursor or summary out of range (bad_page), or a Host "
                            "this service does not answer to; the message says which."
                        ),
                        "503": _UNAVAILABLE,
                    },
                },
                "delete": {
                    "summary": "Forget every dead letter (admin token)",
                    "security": [{"admin": []}],
                    "responses": {
                        "200": _json({"type": "object"}, "How many were forgotten."),
                        **_ADMIN,
                        "503": _UNAVAILABLE,
                    },
                },
            },
            "/dead/requeue": {
                "post": {
                    "summary": "Put every dead letter back (admin token)",
                    "security": [{"admin": []}],
                    "responses": {
                        "200": _json({"type": "object"}, "The ids requeued."),
                        **_ADMIN,
                        "503": _UNAVAILABLE,
                    },
                }
            },
            "/dead/{job_id}/requeue": {
                "post": {
                    "summary": "Put one dead letter back with fresh attempts (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Record"}, "As requeued."),
                        **_ADMIN,
                        "404": _error("Not a dead letter."),
                        "503": _UNAVAILABLE,
                    },
                }
            },
            "/dead/{job_id}": {
                "delete": {
                    "summary": "Forget one dead letter (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": _json({"type": "object"}, "Forgotten."),
                        **_ADMIN,
                        "404": _error("Not a dead letter."),
                        "503": _UNAVAILABLE,
                    },
                }
            },
            "/": {
                "get": {
                    "summary": "The dashboard: one page, live",
                    "responses": {
                        "200": {
                            "description": "The page.",
                            "content": {"text/html": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (the worker's names: docs/metrics.md)",
                    "responses": {
                        "200": {
                            "description": "The text exposition format.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/jobs/{job_id}": {
                "get": {
                    "summary": "A job's record (the token, if the service has one)",
                    "security": [{}, {"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        **_READ,
                        "200": _json({"$ref": "#/components/schemas/Record"}, "The record."),
                        "404": _error("Never enqueued, or finished and forgotten."),
                        "503": _UNAVAILABLE,
                    },
                },
                "delete": {
                    "summary": "Cancel a job (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": _json(_CANCEL, "It waited for a worker: cancelled now."),
                        "202": _json(
                            _CANCEL,
                            "A worker holds it: that worker stops it at its next lease "
                            "renewal, and its state becomes cancelled.",
                        ),
                        **_ADMIN,
                        "404": _error("Never enqueued, or finished and forgotten."),
                        "409": _error("It has finished already: nothing was cancelled."),
                        "503": _UNAVAILABLE,
                    },
                },
            },
            "/stats": {
                "get": {
                    "summary": "Counters, gauges and latency percentiles",
                    "responses": {
                        "200": _json({"type": "object"}, "The metrics snapshot."),
                        "503": _UNAVAILABLE,
                    },
                }
            },
            "/healthz": {
                "get": {
                    "summary": "The service is alive",
                    "responses": {"200": _json({"type": "object"}, "Alive.")},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "The backend answers",
                    "responses": {
                        "200": _json({"type": "object"}, "Ready."),
                        "503": _UNAVAILABLE,
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Error": _ERROR,
                "Receipt": _RECEIPT,
                "Record": _RECORD,
                "NewJob": _NEW_JOB,
            },
            "securitySchemes": {"admin": {"type": "http", "scheme": "bearer"}},
        },
    }
    for operations in document["paths"].values():  # any request may name the wrong host
        for operation in operations.values():
            operation["responses"].setdefault("400", _BAD_HOST)
    return document
