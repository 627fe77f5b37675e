"""A thread that notes the time, so that a pool tells a paused process from a blocked loop.

A lease renewal that wakes late means the event loop did not run: either a
handler blocked it (``time.sleep``, CPU-bound work), or the whole process stood
still (SIGSTOP, a debugger, a suspended VM or container). A handler that blocks
the loop does not stop another thread: a blocking call releases the GIL, and
CPU-bound Python code hands it over every few milliseconds. A paused process
stops every thread, and uses no CPU. So the renewal asks this thread how long
it, too, went without a beat, and how much CPU the process used meanwhile.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from typing import Final

__all__ = ["Heartbeat"]

_EVERY: Final = 0.1  # seconds between beats


class Heartbeat:
    """A daemon thread that notes `time.monotonic` every tenth of a second, while started.

    It keeps the beats of the last *keep* seconds: a window asked about must be no longer.
    """

    def __init__(self, keep: float) -> None:
        self._beats: collections.deque[float] = collections.deque(maxlen=int(keep / _EVERY) + 10)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start beating (once)."""
        self._beats.append(time.monotonic())
        self._thread = threading.Thread(target=self._run, name="trioqueue heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating; the thread ends within a beat, unwaited."""
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(_EVERY):
            self._beats.append(time.monotonic())

    def stood_still(self, since: float, until: float) -> float:
        """The longest time between *since* and *until* (`time.monotonic`) with no beat.

        Before the oldest beat kept, when beats have been dropped, nothing is known:
        the window starts there.
        """
        kept = list(self._beats)
        if len(kept) == self._beats.maxlen:
            since = max(since, kept[0])
        beats = [since, *(beat for beat in kept if since < beat < until), until]
        return max(later - earlier for earlier, later in itertools.pairwise(beats))
