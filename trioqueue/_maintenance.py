"""The pool's upkeep tasks: lease renewal and the periodic sweep."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from trio_util import periodic

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._backend import Backend, Claim

__all__ = ["renew_leases", "sweep_periodically"]

logger = logging.getLogger("trioqueue.pool")


async def renew_leases(backend: Backend, held: Mapping[str, Claim], lease: float) -> None:
    """Renew the leases of the claims in *held* every third of *lease*, forever."""
    async for _ in periodic(lease / 3):
        if held:
            await backend.renew(list(held.values()), lease=lease)


async def sweep_periodically(backend: Backend, interval: float) -> None:
    """Call `Backend.sweep` every *interval* seconds, forever, logging what it did."""
    async for _ in periodic(interval):
        report = await backend.sweep()
        if report.scheduled or report.recovered:
            logger.info(
                "sweep: scheduled %d stored jobs, recovered %d expired claims",
                report.scheduled,
                report.recovered,
            )
