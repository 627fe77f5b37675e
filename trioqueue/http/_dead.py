"""The endpoints that change a queue, and the admin token that guards them.

``GET /dead`` lists the dead letters (a read: open unless the service has a
token). Requeueing and purging them, and cancelling a job (``DELETE /jobs/{id}``),
change the queue, so they need ``Authorization: Bearer <token>`` with the token
the service was started with (``--admin-token`` or ``TRIOQUEUE_ADMIN_TOKEN``); a
service started without one has them off (403, saying how to turn them on). See
`_access` for who may do what.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._backend import CancelResult
from .._exceptions import BackendUnavailable, JobNotFound
from ._jobs import error, unavailable
from ._json import JSONResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._queue import Queue
    from ._access import Access

__all__ = ["AdminActions"]


class AdminActions:
    """The handlers of the dead-letter endpoints and of cancelling, for one queue."""

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
        """``GET /dead``: every dead letter, oldest first."""
        refused = self._access.refuse_read(request)
        if refused is not None:
            return refused
        try:
            records = await self._queue.dead_letters()
        except BackendUnavailable as exc:
            return unavailable(exc, "try again")
        return JSONResponse({"dead": [self._access.record(record) for record in records]})

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
            for record in await self._queue.dead_letters():
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
