"""The endpoints that change a queue, and the admin token that guards them.

``GET /dead`` lists the dead letters (a read: open unless the service has a
token). Requeueing and purging them, cancelling a job (``DELETE /jobs/{id}``), and
pausing and resuming the queue (``POST /queue/pause``, ``/queue/resume``) change
the queue, so they need ``Authorization: Bearer <token>`` with the token
the service was started with (``--admin-token`` or ``TRIOQUEUE_ADMIN_TOKEN``); a
service started without one has them off (403, saying how to turn them on). See
`_access` for who may do what.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._backend_values import CancelResult
from .._exceptions import BackendUnavailable, JobNotFound
from ._dead_page import DEFAULT_PAGE, MAX_PAGE, SUMMARY, is_whole
from ._jobs import error, unavailable
from ._json import JSONResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._queue import Queue
    from ._access import Access

__all__ = ["AdminActions"]


def _page(request: Request) -> tuple[int, int, bool] | JSONResponse:
    """The offset, limit and summary flag a ``GET /dead`` asks for, or the 400 saying why not."""
    query = request.query_params
    limit_text, cursor = query.get("limit", str(DEFAULT_PAGE)), query.get("cursor", "0")
    if not (is_whole(limit_text) and 1 <= int(limit_text) <= MAX_PAGE):
        return error(400, "bad_page", f"limit is a whole number from 1 to {MAX_PAGE}")
    if not is_whole(cursor):
        return error(
            400,
            "bad_page",
            'cursor is the "next" of the page before; leave it out for the first page',
        )
    summary = query.get("summary", "false").lower()
    if summary not in ("true", "false", "1", "0"):
        return error(400, "bad_page", "summary is true or false")
    return int(cursor), int(limit_text), summary in ("true", "1")


class AdminActions:
    """The handlers of the endpoints that change one queue: dead letters, cancel, pause."""

    def __init__(self, queue: Queue, access: Access) -> None:
        self._queue = queue
        self._access = access
        self._refused = access.refuse_change

    async def list_or_purge_all(self, request: Request) -> JSONResponse:
        """``/dead``: GET lists, DELETE purges (one route: its ``Allow`` names both)."""
        if request.method == "DELETE":
            return await self.purge_all(request)
        return await self.list(request)

    async def list(self, request: Request) -> JSONResponse:
        """``GET /dead``: a page of the dead letters, oldest first, and the next page's cursor.

        ``?limit=N`` (1 to `MAX_PAGE`, default `DEFAULT_PAGE`), ``?cursor=C`` from the
        last page's ``next``, ``?summary=true`` for each letter without its payload,
        result and traceback (what the dashboard shows).
        """
        refused = self._access.refuse_read(request)
        if refused is not None:
            return refused
        page = _page(request)
        if isinstance(page, JSONResponse):
            return page
        offset, limit, summary = page
        try:  # one more than asked: whether there is a next page
            records = await self._queue.dead_letters(offset=offset, limit=limit + 1)
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        shown = [self._access.record(record) for record in records[:limit]]
        if summary:
            shown = [{name: letter.get(name) for name in SUMMARY} for letter in shown]
        more = len(records) > limit
        return JSONResponse({"dead": shown, "next": str(offset + limit) if more else None})

    async def requeue(self, request: Request) -> JSONResponse:
        """``POST /dead/{id}/requeue``: one dead letter back with fresh attempts."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        job_id = request.path_params["job_id"]
        try:
            record = await self._queue.requeue_dead(job_id)
        except JobNotFound as exc:
            return error(404, "not_found", str(exc))
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        return JSONResponse(self._access.record(record))

    async def requeue_all(self, request: Request) -> JSONResponse:
        """``POST /dead/requeue``: every dead letter back; the ids requeued."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        requeued: list[str] = []
        try:
            for record in await self._queue.dead_letters():  # all of them, not a page
                try:
                    await self._queue.requeue_dead(record.id)
                except JobNotFound:  # purged or requeued by someone else meanwhile
                    continue
                requeued.append(record.id)
        except BackendUnavailable as exc:
            return unavailable(exc, f"requeued so far: {requeued}; send it again")
        return JSONResponse({"requeued": requeued})

    async def purge(self, request: Request) -> JSONResponse:
        """``DELETE /dead/{id}``: forget one dead letter."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        job_id = request.path_params["job_id"]
        try:
            purged = await self._queue.purge_dead(job_id)
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        if not purged:
            return error(404, "not_found", f"{job_id!r} is not a dead letter")
        return JSONResponse({"purged": purged})

    async def purge_all(self, request: Request) -> JSONResponse:
        """``DELETE /dead``: forget every dead letter; how many."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            purged = await self._queue.purge_dead()
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        return JSONResponse({"purged": purged})

    async def cancel(self, request: Request) -> JSONResponse:
        """``DELETE /jobs/{id}``: cancel a job (see `Queue.cancel`)."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        job_id = request.path_params["job_id"]
        try:
            done = await self._queue.cancel(job_id)
            record = await self._queue.status(job_id)
        except JobNotFound as exc:
            return error(404, "not_found", str(exc))
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        state = "gone" if record is None else record.state.value
        if done is CancelResult.FINISHED:
            return error(
                409, "finished", f"job {job_id!r} has finished already ({state})", state=state
            )
        if done is CancelResult.CANCELLED:
            return JSONResponse({"id": job_id, "cancel": done.value, "state": state})
        return JSONResponse(
            {
                "id": job_id,
                "cancel": done.value,
                "state": state,
                "message": "a worker holds the job: it stops it at its next lease renewal; "
                "GET /jobs/ID shows state cancelled once it has",
            },
            202,
        )

    async def pause_or_resume(self, request: Request) -> JSONResponse:
        """``POST /queue/pause`` and ``/queue/resume``: whether the queue is paused now."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        pause = request.url.path.endswith("/pause")
        try:
            await (self._queue.pause() if pause else self._queue.resume())
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        return JSONResponse({"paused": pause})
