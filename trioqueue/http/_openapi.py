"""The HTTP service's OpenAPI 3.1 document, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from .._backend_values import PLACES
from .._payload import MAX_ID_LENGTH
from ._dead_page import (
    BROWSE_DEEPEST,
    BROWSE_FIELDS,
    DEFAULT_BROWSE,
    DEFAULT_PAGE,
    MAX_BROWSE,
    MAX_PAGE,
)
from ._openapi_parts import (
    ADMIN,
    BAD_HOST,
    CANCEL,
    DEAD_SUMMARY,
    ERROR,
    NEW_JOB,
    NOT_JSON,
    READ,
    RECEIPT,
    RECORD,
    UNAVAILABLE,
    WRITE,
    error_answer,
    json_answer,
)

__all__ = ["openapi_document"]


BROWSED: dict[str, Any] = {
    "type": "object",
    "description": "A job of a place, summed up.",
    "required": list(BROWSE_FIELDS),
    "additionalProperties": False,
    "properties": {name: RECORD["properties"].get(name, {}) for name in BROWSE_FIELDS},
}


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
                "get": {
                    "summary": "A page of the jobs in one place, next in turn first (the "
                    "token, if the service has one)",
                    "security": [{}, {"admin": []}],
                    "parameters": [
                        {
                            "name": "place",
                            "in": "query",
                            "required": True,
                            "description": "Where the jobs are (Queue.job_ids).",
                            "schema": {"enum": list(PLACES)},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "description": f"Jobs on the page ({DEFAULT_BROWSE} unless given).",
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_BROWSE},
                        },
                        {
                            "name": "cursor",
                            "in": "query",
                            "required": False,
                            "description": "The next of the page before; none for the first. "
                            f"Pages reach the first {BROWSE_DEEPEST:,} jobs of a place.",
                            "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"},
                        },
                    ],
                    "responses": {
                        **READ,
                        "200": json_answer(
                            {
                                "type": "object",
                                "required": ["place", "jobs", "next"],
                                "properties": {
                                    "place": {"enum": list(PLACES)},
                                    "jobs": {"type": "array", "items": BROWSED},
                                    "next": {
                                        "type": ["string", "null"],
                                        "description": "The cursor of the next page; null on "
                                        "the last.",
                                    },
                                },
                            },
                            "A page of the place's jobs, each summed up; jobs move on between "
                            "pages, so one may show twice, or not at all.",
                        ),
                        "400": error_answer(
                            "No such place (bad_place), a limit or cursor out of range "
                            "(bad_page), or a Host this service does not answer to."
                        ),
                        "503": UNAVAILABLE,
                    },
                },
                "post": {
                    "summary": "Store a job (idempotent by id)",
                    "security": [{}, {"ingest": []}, {"admin": []}],
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
                        "201": json_answer(
                            {"$ref": "#/components/schemas/Receipt"},
                            "Stored and scheduled (on the ready queue).",
                            headers={"Location": {"schema": {"type": "string"}}},
                        ),
                        "202": json_answer(
                            {"$ref": "#/components/schemas/Receipt"},
                            "Stored but not on the ready queue (queued is false): the queue is "
                            "full, and it goes on as soon as room frees; or it was given a "
                            "delay or an at (scheduled is true), and goes on when due; or it "
                            "runs after other jobs (deferred is true), and goes on once they "
                            "have all completed.",
                            headers={"Location": {"schema": {"type": "string"}}},
                        ),
                        "200": json_answer(
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
                        "400": error_answer(
                            "Bad JSON, a bad id or payload, or a Host this service does not "
                            "answer to; the message says which."
                        ),
                        **NOT_JSON,
                        **WRITE,
                        "409": json_answer(
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
                        "422": json_answer(
                            {
                                "allOf": [
                                    {"$ref": "#/components/schemas/Error"},
                                    {
                                        "type": "object",
                                        "properties": {
                                            "id": {"type": "string"},
                                            "after": {"type": "string"},
                                        },
                                    },
                                ]
                            },
                            "A job named in after is unknown (never stored, or forgotten "
                            "after the retention): nothing was stored.",
                        ),
                        "413": error_answer(
                            f"The body is over {max_body:,} bytes, or (too_large) the job "
                            "alone is larger than a queue in memory may hold (--max-memory)."
                        ),
                        "503": UNAVAILABLE,
                    },
                },
            },
            "/jobs/batch": {
                "post": {
                    "summary": "Store many jobs; all are checked before any is stored",
                    "security": [{}, {"ingest": []}, {"admin": []}],
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
                        "200": json_answer(
                            {
                                "type": "object",
                                "properties": {
                                    "results": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["status", "id"],
                                            "properties": {
                                                "status": {
                                                    "enum": [200, 201, 202, 409, 413, 422, 503]
                                                },
                                                "id": {"type": "string"},
                                            },
                                        },
                                    }
                                },
                            },
                            "One result per job, in order, each with the status POST /jobs "
                            "would have answered.",
                        ),
                        "400": error_answer(
                            "A bad job (its place is named), or a Host this service does not "
                            "answer to; nothing was stored."
                        ),
                        **NOT_JSON,
                        **WRITE,
                        "413": error_answer(f"The body is over {max_body:,} bytes."),
                        "503": UNAVAILABLE,
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
                        **READ,
                        "200": json_answer(
                            {
                                "type": "object",
                                "required": ["dead", "next"],
                                "properties": {
                                    "dead": {
                                        "type": "array",
                                        "items": {
                                            "anyOf": [
                                                {"$ref": "#/components/schemas/Record"},
                                                DEAD_SUMMARY,
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
                        "400": error_answer(
                            "A limit, cursor or summary out of range (bad_page), or a Host "
                            "this service does not answer to; the message says which."
                        ),
                        "503": UNAVAILABLE,
                    },
                },
                "delete": {
                    "summary": "Forget every dead letter (admin token)",
                    "security": [{"admin": []}],
                    "responses": {
                        "200": json_answer({"type": "object"}, "How many were forgotten."),
                        **ADMIN,
                        "503": UNAVAILABLE,
                    },
                },
            },
            "/dead/requeue": {
                "post": {
                    "summary": "Put every dead letter back (admin token)",
                    "security": [{"admin": []}],
                    "responses": {
                        "200": json_answer({"type": "object"}, "The ids requeued."),
                        **ADMIN,
                        "503": UNAVAILABLE,
                    },
                }
            },
            "/dead/{job_id}/requeue": {
                "post": {
                    "summary": "Put one dead letter back with fresh attempts (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": json_answer({"$ref": "#/components/schemas/Record"}, "As requeued."),
                        **ADMIN,
                        "404": error_answer("Not a dead letter."),
                        "503": UNAVAILABLE,
                    },
                }
            },
            "/dead/{job_id}": {
                "delete": {
                    "summary": "Forget one dead letter (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": json_answer({"type": "object"}, "Forgotten."),
                        **ADMIN,
                        "404": error_answer("Not a dead letter."),
                        "503": UNAVAILABLE,
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
            "/jobs/{job_id}/run": {
                "post": {
                    "summary": "Run a job that waits for its due time now (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": json_answer(
                            {"$ref": "#/components/schemas/Record"},
                            "Its record: on the ready queue, or (queue full) first to go on.",
                        ),
                        **ADMIN,
                        "404": error_answer("It is not waiting for a due time."),
                        "503": UNAVAILABLE,
                    },
                }
            },
            "/jobs/{job_id}": {
                "get": {
                    "summary": "A job's record (the token, if the service has one)",
                    "security": [{}, {"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        **READ,
                        "200": json_answer({"$ref": "#/components/schemas/Record"}, "The record."),
                        "404": error_answer("Never enqueued, or finished and forgotten."),
                        "503": UNAVAILABLE,
                    },
                },
                "delete": {
                    "summary": "Cancel a job (admin token)",
                    "security": [{"admin": []}],
                    "parameters": [job_id],
                    "responses": {
                        "200": json_answer(CANCEL, "It waited for a worker: cancelled now."),
                        "202": json_answer(
                            CANCEL,
                            "A worker holds it: that worker stops it at its next lease "
                            "renewal, and its state becomes cancelled.",
                        ),
                        **ADMIN,
                        "404": error_answer("Never enqueued, or finished and forgotten."),
                        "409": error_answer("It has finished already: nothing was cancelled."),
                        "503": UNAVAILABLE,
                    },
                },
            },
            **{
                f"/queue/{action}": {
                    "post": {
                        "summary": f"{action.capitalize()} the queue (admin token)",
                        "security": [{"admin": []}],
                        "responses": {
                            "200": json_answer(
                                {"type": "object"}, "Whether the queue is paused now."
                            ),
                            **ADMIN,
                            "503": UNAVAILABLE,
                        },
                    }
                }
                for action in ("pause", "resume")
            },
            "/stats": {
                "get": {
                    "summary": "Counters, gauges, latency percentiles, whether paused, and "
                    "the rate limits",
                    "responses": {
                        "200": json_answer({"type": "object"}, "The metrics snapshot."),
                        "503": UNAVAILABLE,
                    },
                }
            },
            "/healthz": {
                "get": {
                    "summary": "The service is alive",
                    "responses": {"200": json_answer({"type": "object"}, "Alive.")},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "The backend answers",
                    "responses": {
                        "200": json_answer({"type": "object"}, "Ready."),
                        "503": UNAVAILABLE,
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Error": ERROR,
                "Receipt": RECEIPT,
                "Record": RECORD,
                "NewJob": NEW_JOB,
            },
            "securitySchemes": {
                "admin": {"type": "http", "scheme": "bearer"},
                "ingest": {"type": "http", "scheme": "bearer"},
            },
        },
    }
    for operations in document["paths"].values():  # any request may name the wrong host
        for operation in operations.values():
            operation["responses"].setdefault("400", BAD_HOST)
    return document
