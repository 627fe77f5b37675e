"""What a pool holds: every claim, from its claim until the backend took its outcome."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from collections.abc import Set as AbstractSet

    from .._backend_values import Claim

__all__ = ["Books"]


def _nothing() -> None:
    pass


def _ignore(tokens: AbstractSet[str]) -> None:
    pass


@final
class Books:
    """The claims of one pool and what it knows of their leases.

    A claim is held from the moment the backend gave it until the backend took
    its outcome (or it was given back); whatever is still held when the pool
    stops is released. The lease renewer and the sweeper renew what is in
    `held` and note the new times with `extend`.
    """

    def __init__(self) -> None:
        self.held: dict[str, Claim] = {}
        """Every claim held, by token."""
        self.lease_until: dict[str, float] = {}
        """When each held claim's lease runs out at the latest, as far as this pool
        knows (Trio's clock): a claim whose lease ran out is not started."""
        self.unsettled: set[str] = set()
        """Claims whose handler started and whose outcome has not reached the backend:
        an at-most-once backend must never get these back to run again."""
        self.settled = trio.lowlevel.ParkingLot()
        """Unparked whenever a claim is forgotten."""
        self.emptied: Callable[[], None] = _nothing
        """Called when the last held claim is forgotten."""
        self.cancel_requested: Callable[[AbstractSet[str]], None] = _ignore
        """Called with the tokens of held claims whose jobs were cancelled (a renewal
        said so): the pool stops them."""

    def take(self, claims: Sequence[Claim], until: float) -> None:
        """Hold *claims*, whose leases run out at *until* at the latest."""
        for claim in claims:
            self.held[claim.token] = claim
            self.lease_until[claim.token] = until

    def extend(self, claims: Sequence[Claim], until: float, lost: AbstractSet[str]) -> None:
        """A renewal of *claims* landed: each still held and not *lost* now lasts *until*.

        A claim the backend no longer holds keeps the time it had: a worker that has
        not started it yet gives it back instead of running the job a second time.
        """
        for claim in claims:
            if claim.token in self.lease_until and claim.token not in lost:
                self.lease_until[claim.token] = until

    def lapsed(self, claim: Claim) -> bool:
        """Whether *claim*'s lease may have run out already: then it must not start."""
        return trio.current_time() >= self.lease_until.get(claim.token, math.inf)

    def forget(self, claim: Claim) -> None:
        """Stop holding *claim*: the backend took its outcome, or has it back."""
        self.held.pop(claim.token, None)
        self.lease_until.pop(claim.token, None)
        self.unsettled.discard(claim.token)
        if self.settled:
            self.settled.unpark_all()
        if not self.held:
            self.emptied()

    def clear(self) -> list[Claim]:
        """Stop holding every claim; return them."""
        claims = list(self.held.values())
        self.held.clear()
        return claims
