"""Who may read and change a queue over HTTP, and what a record shows there.

One bearer token guards both. Without one, reads are open (``serve`` then binds
to loopback only, unless told ``--insecure``) and the endpoints that change a
queue are off. With one, reading a job or the dead letters needs it as much as
requeueing, purging or cancelling: a record holds the payload, the result and
the last error, and an error's message may quote a secret. Counters, gauges,
health and the OpenAPI document stay open: they hold no job's data.

Tracebacks are not served unless asked for (``tracebacks=True``): they name the
handler's files and quote its source lines. A record shows its last error's type
and message without them.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from .._record_json import record_json
from ._jobs import error
from ._json import JSONResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._records import JobRecord

__all__ = ["Access"]


class Access:
    """The token of one service (None: none), and whether its records show tracebacks."""

    def __init__(self, token: str | None, *, tracebacks: bool) -> None:
        self._token = token
        self._tracebacks = tracebacks

    def _token_given(self, request: Request) -> bool:
        assert self._token is not None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.encode(), self._token.encode()
        )

    def may_read(self, request: Request) -> bool:
        """Whether *request* may see jobs' records: no token set, or it sent the token."""
        return self._token is None or self._token_given(request)

    def refuse_read(self, request: Request) -> JSONResponse | None:
        """The 401 for a read of job data without the token; None if it may go on."""
        if self.may_read(request):
            return None
        return _unauthorized("reading jobs needs the service's token")

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
        if self._token_given(request):
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
        {"error": "unauthorized", "message": f"{what}: send Authorization: Bearer <admin token>"},
        401,
        headers={"WWW-Authenticate": "Bearer"},
    )
