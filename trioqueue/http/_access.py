"""Who may read and change a queue over HTTP, and what a record shows there.

Two bearer tokens, each optional: the admin token (reading jobs and dead
letters, and every change: requeue, purge, cancel, pause) and the ingest token
(sending jobs). Given only an admin token, sending jobs needs it too. Once any
token is set, every write needs one, so an anonymous client can send nothing
and learns nothing of other jobs. Reading jobs needs the admin token when one is
set, else the ingest token when that is set. Counters, gauges, health, the
OpenAPI document and the dashboard page stay open: they hold no job's data.

With no token at all (``serve`` then binds to loopback only, unless told
``--insecure``), anyone who reaches the service may send plain jobs and read
them, and changes are off. The options that act on other jobs or jump ahead of
them (`PRIVILEGED_FIELDS`: ``unique_key``, ``debounce``, ``after``, ``rate_key``,
``headers``, ``priority``) are taken only from a client that sent a token: an
anonymous one could replace another producer's waiting job, block its enqueue,
learn which ids exist, or plant a trace context.

Tracebacks are not served unless asked for (``tracebacks=True``): they name the
handler's files and quote its source lines. A record shows its last error's type
and message without them.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any, Final

from .._record_json import record_json
from ._jobs import error
from ._json import JSONResponse

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from starlette.requests import Request

    from .._records import JobRecord

__all__ = ["PRIVILEGED_FIELDS", "Access"]

PRIVILEGED_FIELDS: Final = ("unique_key", "debounce", "after", "rate_key", "headers", "priority")
"""A job's fields taken over HTTP only from a client that sent a token (see the module)."""


class Access:
    """The tokens of one service (None: none), and whether its records show tracebacks."""

    def __init__(
        self, token: str | None, *, tracebacks: bool, ingest_token: str | None = None
    ) -> None:
        self._token = token
        self._ingest = ingest_token
        self._tracebacks = tracebacks

    @property
    def guarded(self) -> bool:
        """Whether the service has a token at all: then every write needs one."""
        return self._token is not None or self._ingest is not None

    def _sent(self, request: Request, token: str | None) -> bool:
        if token is None:
            return False
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode())

    def holds_token(self, request: Request) -> bool:
        """Whether *request* sent one of the service's tokens."""
        return self._sent(request, self._token) or self._sent(request, self._ingest)

    def may_read(self, request: Request) -> bool:
        """Whether *request* may see jobs' records (see the module)."""
        if self._token is not None:
            return self._sent(request, self._token)
        return self._ingest is None or self._sent(request, self._ingest)

    def refuse_read(self, request: Request) -> JSONResponse | None:
        """The 401 for a read of job data without the token; None if it may go on."""
        if self.may_read(request):
            return None
        return _unauthorized("reading jobs needs the service's token")

    def refuse_write(
        self, request: Request, jobs: Iterable[Mapping[str, Any]]
    ) -> JSONResponse | None:
        """The 401 or 403 for sending *jobs* (their JSON objects); None if it may go on.

        A field given as null counts as not given, and so does ``priority`` 0.

        Checked before anything is stored or looked up, so a refusal tells nothing
        of other jobs.
        """
        if self.holds_token(request):
            return None
        if self.guarded:
            return _unauthorized(
                "sending jobs needs the service's ingest token (or its admin token)"
            )
        for job in jobs:
            used = [name for name in PRIVILEGED_FIELDS if job.get(name) not in (None, 0)]
            if used:
                return error(
                    403,
                    "needs_token",
                    f"{', '.join(used)} act on other jobs, so the service takes them only "
                    "from a client with a token: start it with --ingest-token (or "
                    "TRIOQUEUE_INGEST_TOKEN) and send Authorization: Bearer <token>, or "
                    "leave them out",
                )
        return None

    def refuse_change(self, request: Request) -> JSONResponse | None:
        """The 403 or 401 for a change without the right token; None if it may go on."""
        if self._token is None:
            return error(
                403,
                "admin_off",
                "requeueing, purging, cancelling and pausing are off: start the service with "
                "--admin-token "
                "(or TRIOQUEUE_ADMIN_TOKEN) and send it as Authorization: Bearer <token>",
            )
        if self._sent(request, self._token):
            return None
        return _unauthorized("this change needs the service's admin token")

    def record(self, record: JobRecord) -> dict[str, Any]:
        """*record* as JSON, its last error's traceback left out unless tracebacks are served."""
        data = record_json(record)
        if not self._tracebacks and data.get("last_error"):
            data["last_error"].pop("traceback", None)
        return data


def _unauthorized(what: str) -> JSONResponse:
    return JSONResponse(
        {"error": "unauthorized", "message": f"{what}: send Authorization: Bearer <token>"},
        401,
        headers={"WWW-Authenticate": "Bearer"},
    )
