"""The pool's upkeep tasks: lease renewal and the periodic sweep."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from trio_util import periodic

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._backend import Backend, Claim
from ._exceptions import BackendUnavailable

__all__ = ["renew_leases", "sweep_periodically"]

logger = logging.getLogger("trioqueue.pool")


async def renew_leases(backend: Backend, held: Mapping[str, Claim], lease: float) -> None:
    """Renew the leases of the claims in *held* every third of *lease*, forever."""
    async for _ in periodic(lease / 3):
        if held:
            try:
                await backend.renew(list(held.values()), lease=lease)
            except BackendUnavailable as exc:
                backend.metrics.backend_errors += 1
                logger.warning("renewing %d leases: %s; trying again next period", len(held), exc)


async def sweep_periodically(backend: Backend, interval: float) -> None:
    """Call `Backend.sweep` every *interval* seconds, forever, logging what it did."""
    async for _ in periodic(interval):
        try:
            report = await backend.sweep()
        except BackendUnavailable as exc:
            backend.metrics.backend_errors += 1
            logger.warning("sweeping: %s; trying again next period", exc)
            continue
        if report.scheduled or report.recovered:
            logger.info(
                "sweep: scheduled %d stored jobs, recovered %d expired claims",
                report.scheduled,
                report.recovered,
            )
