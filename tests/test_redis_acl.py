"""The Redis ACL that the README gives a worker, a producer and ``stats`` is enough."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import trio

import trioqueue
from trioqueue import Queue

from .test_redis_url import redis_command

if TYPE_CHECKING:
    from .redis_server import RedisServer

README = Path(__file__).resolve().parent.parent / "README.md"


def documented_rule() -> list[str]:
    """The ACL rule of the README's "Redis ACL" item, for queue ``{mail}``."""
    text = README.read_text()
    found = re.search(r"\*\*Redis ACL\*\*.*?`(~\{mail\}\*[^`]+)`", text, re.S)
    assert found, "the README lost its Redis ACL item"
    return found.group(1).split()


async def test_a_worker_producer_and_stats_run_on_the_documented_acl(redis_server: RedisServer):
    tag = "acl-" + uuid.uuid4().hex[:8]
    user, password = "tq-" + tag, "secret-" + tag
    rule = [part.replace("{mail}", "{" + tag + "}") for part in documented_rule()]
    setuser = ("ACL", "SETUSER", user, "on", ">" + password, *rule)
    assert redis_command(redis_server.port, *setuser) == b"+OK\r\n"
    url = redis_server.url.replace("redis://", f"redis://{user}:{password}@")
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)
        if job.id == "dead":
            raise RuntimeError("to the dead letters")

    retry = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.RedisBackend(url, queue="{" + tag + "}", min_idle=30) as backend:
        queue = Queue(backend)
        with trio.fail_after(30):
            async with trioqueue.open_worker_pool(backend, handler, retry=retry, poll_interval=60):
                await queue.enqueue("p", id="ok")
                await queue.submit("q", id="dead")
        await backend.requeue_dead("dead")
        assert await backend.purge_dead() == 0
        info = await backend.inspect()
        stats = await backend.stats()
    assert sorted(ran) == ["dead", "ok"]
    assert (stats.succeeded, stats.dead_lettered, info.ready) == (1, 1, 1)
