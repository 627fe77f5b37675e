"""Tutorial, part 4: the handler a worker process runs (``trioqueue worker images:resize``)."""

import trio

import trioqueue


async def resize(job: trioqueue.Job) -> dict[str, str]:
    """Resize one image; what it returns is kept on the job's record, as JSON."""
    await trio.sleep(job.payload["width"] / 1000)  # the work
    return {"thumbnail": f"small-{job.payload['image']}"}
