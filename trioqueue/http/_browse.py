"""``GET /jobs?place=…``: the jobs of one place a page at a time, and ``POST /jobs/{id}/run``.

What the dashboard's job browser reads and does. Listing is a read (open unless the
service has a token); running a job now changes the queue, so it needs the token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._backend_values import PLACES
from .._exceptions import BackendUnavailable, JobNotFound
from ._dead_page import BROWSE_DEEPEST, BROWSE_FIELDS, DEFAULT_BROWSE, MAX_BROWSE, is_whole
from ._jobs import error, unavailable
from ._json import JSONResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._queue import Queue
    from ._access import Access

__all__ = ["Browse"]


class Browse:
    """The handlers of the job browser: list a place, run a waiting job now."""

    def __init__(self, queue: Queue, access: Access) -> None:
        self._queue = queue
        self._access = access

    async def list(self, request: Request) -> JSONResponse:
        """``GET /jobs?place=P``: a page of the jobs in place P, next in turn first.

        ``?limit=N`` (1 to `MAX_BROWSE`, default `DEFAULT_BROWSE`), ``?cursor=C`` from
        the last page's ``next``; each job as its `BROWSE_FIELDS`. A page is as of its
        call: jobs move on between pages (that is what a queue does), so a job may
        show on two pages, or on none. The first `BROWSE_DEEPEST` jobs of a place
        can be paged through; ``trioqueue jobs`` lists more.
        """
        refused = self._access.refuse_read(request)
        if refused is not None:
            return refused
        query = request.query_params
        place = query.get("place", "")
        if place not in PLACES:
            return error(400, "bad_place", f"place is one of {', '.join(PLACES)}")
        limit_text, cursor = query.get("limit", str(DEFAULT_BROWSE)), query.get("cursor", "0")
        if not (is_whole(limit_text) and 1 <= int(limit_text) <= MAX_BROWSE):
            return error(400, "bad_page", f"limit is a whole number from 1 to {MAX_BROWSE}")
        if not is_whole(cursor):
            return error(
                400,
                "bad_page",
                'cursor is the "next" of the page before; leave it out for the first page',
            )
        offset, limit = int(cursor), int(limit_text)
        if offset + limit > BROWSE_DEEPEST:
            return error(
                400,
                "bad_page",
                f"a place is paged through to its {BROWSE_DEEPEST:,}th job; list further with "
                "trioqueue jobs PLACE --limit N",
            )
        try:  # one more than asked: whether there is a next page
            ids = await self._queue.job_ids(place, limit=offset + limit + 1)
            shown: list[dict[str, Any]] = []
            for job_id in ids[offset : offset + limit]:
                record = await self._queue.status(job_id)
                if record is not None:  # forgotten since it was listed
                    found = self._access.record(record)
                    shown.append({name: found.get(name) for name in BROWSE_FIELDS})
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        more = len(ids) > offset + limit
        return JSONResponse(
            {"place": place, "jobs": shown, "next": str(offset + limit) if more else None}
        )

    async def run_now(self, request: Request) -> JSONResponse:
        """``POST /jobs/{id}/run``: a job waiting for its due time, due now (`Queue.run_now`)."""
        refused = self._access.refuse_change(request)
        if refused is not None:
            return refused
        job_id = request.path_params["job_id"]
        try:
            record = await self._queue.run_now(job_id)
        except JobNotFound as exc:
            return error(404, "not_found", str(exc))
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        return JSONResponse(self._access.record(record))
