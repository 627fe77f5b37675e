"""A backend in the pool's own process: claims and outcomes as synchronous calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ._backend import Backend

if TYPE_CHECKING:
    from ._backend_values import Claim
    from ._outcome import Outcome

__all__ = ["InlineBackend", "inline_backend"]


class InlineBackend(Backend, Protocol):
    """A backend in the pool's own process, whose claims and outcomes are synchronous calls.

    Such a call cannot fail, be cut half-way or wait on the network, so a pool
    (``_pool/_inline.py``) makes it in the worker task itself: no fetcher, channel,
    shield or deadline per job. A class says it is one with a true ``_INLINE`` of its
    own (`inline_backend`); the names are private: no user calls them.
    """

    _INLINE: bool

    def _claim_now(self, max_jobs: int, lease: float) -> list[Claim]:
        """Claim up to *max_jobs* jobs ready now, as `claim` does, without waiting."""
        ...

    def _settle_now(self, claim: Claim, outcome: Outcome) -> bool:
        """Record *outcome* of *claim* as the call for it does; False if the claim is stale."""
        ...

    def _held(self) -> int:
        """Jobs accepted and not finished (`pending`), at once."""
        ...

    def _waits_untimed(self) -> bool:
        """Whether a claimer finding nothing may wait with no deadline (`_wait_for_work`).

        True when only a new job, a resume, a changed rate limit or a recovery can
        give it one: nothing is stored to come due, and no queue limit holds a start.
        """
        ...

    async def _wait_for_work(self) -> None:
        """Wait until a job may be ready, or `_wake_claimers`."""
        ...

    def _wake_claimers(self) -> None:
        """Wake every claimer waiting in this process, to look again."""
        ...


def inline_backend(backend: Backend) -> InlineBackend | None:
    """*backend* when its class is an `InlineBackend`, else None.

    The class's own attribute decides, not the instance's: a wrapper that forwards
    attributes to a memory backend (a test's) is a backend like any other.
    """
    if vars(type(backend)).get("_INLINE") is True:
        return backend  # type: ignore[return-value]  # _INLINE says so
    return None
