"""The handler the chaos run's ``trioqueue worker`` processes run.

Every execution appends ``start`` and ``done`` lines (job id, pid, wall time) to
the file named by ``CHAOS_LOG``; each line is one ``write`` to a file opened for
appending, so lines from many processes never interleave. A poison job kills its
own process before it can finish, as a segfaulting extension would.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    import trioqueue

_LOG = os.open(os.environ["CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def _record(what: str, job_id: str) -> None:
    os.write(_LOG, f"{what} {job_id} {os.getpid()} {time.time():.6f}\n".encode())


async def run(job: trioqueue.Job) -> None:
    _record("start", job.id)
    if job.payload.get("poison"):
        os._exit(13)  # the whole worker dies, mid-handler, with no cleanup
    await trio.sleep(job.payload["ms"] / 1000)
    _record("done", job.id)
