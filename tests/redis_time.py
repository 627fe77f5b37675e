"""Moving a Redis backend's injected clock the way a live queue sees time pass."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import trioqueue


class Clock:
    """A backend clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def pass_time(backend: trioqueue.RedisBackend, clock: Any, seconds: float) -> None:
    """Move *clock* (a ``{"now": t}`` dict or an object with ``.now``) on by *seconds*.

    At every quarter lease a worker touches the queue (a renewal of nothing), as a
    running pool's sweeper and renewals do: the jump is time passing on a live
    queue, not a silence in which nobody could reach Redis (after which expired
    claims get one more lease; see ``touch`` in lua/prelude/3-claims.lua).
    """
    step = backend.default_lease / 4
    while seconds > 0:
        moved = min(step, seconds)
        if isinstance(clock, dict):
            clock["now"] += moved
        else:
            clock.now += moved
        seconds -= moved
        await backend._run("renew", backend.default_lease, "")  # touches, renews nothing
