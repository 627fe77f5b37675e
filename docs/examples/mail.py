"""How-to: handlers that share one HTTP client, which a lifespan opens and closes.

Run it with ``trioqueue worker mail:lifespan --lifespan ...``, or in Python
with `work`.
"""

import contextlib
from collections.abc import AsyncIterator

import httpx

import trioqueue

MAIL_API = "https://mail.example.com"


def mail_handler(client: httpx.AsyncClient) -> trioqueue.Handler:
    """The handler, given the client it shares with every other attempt."""

    async def send_email(job: trioqueue.Job) -> None:
        reply = await client.post("/send", json=job.payload)
        if reply.status_code == 422:  # the server will never take it: do not retry
            raise trioqueue.Drop(f"refused: {reply.text}")
        reply.raise_for_status()  # a 5xx fails the attempt: it is retried

    return send_email


@contextlib.asynccontextmanager
async def lifespan() -> AsyncIterator[trioqueue.Handler]:
    """Open the client before the first job; close it after the last one."""
    async with httpx.AsyncClient(base_url=MAIL_API, timeout=10) as client:
        yield mail_handler(client)


async def work(backend: trioqueue.Backend) -> None:
    """Run the mail jobs of *backend*, with the lifespan opened around the pool."""
    async with lifespan() as handler, trioqueue.open_worker_pool(backend, handler) as pool:
        await pool.wait_stopped()  # until the pool is stopped, or this is cancelled
