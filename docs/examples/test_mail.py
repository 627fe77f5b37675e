"""How-to: testing handlers, with the memory backend and Trio's mock clock.

Run with pytest and pytest-trio (``trio_mode = true``, or mark the tests
``@pytest.mark.trio``). ``autojump_clock`` makes every wait, the retries'
backoff included, pass at once: these tests take milliseconds.
"""

import json

import httpx
import pytest
import trio
from mail import MAIL_API, mail_handler

import trioqueue

pytestmark = pytest.mark.trio


def fake_mail_server(busy_for: int) -> tuple[list[str], httpx.MockTransport]:
    """A mail API that answers 503 to its first *busy_for* calls; the addresses it sent to."""
    sent: list[str] = []
    calls = 0

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        to = json.loads(request.content)["to"]
        if to.endswith(".invalid"):
            return httpx.Response(422, text="no such domain")
        if calls <= busy_for:
            return httpx.Response(503)
        sent.append(to)
        return httpx.Response(200)

    return sent, httpx.MockTransport(answer)


async def test_a_busy_server_is_retried_and_a_refused_address_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two 503s cost two retries, not the job; a 422 drops the job at once."""
    sent, transport = fake_mail_server(busy_for=3)
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    # a production policy: seconds between tries, which the mock clock skips
    retry = trioqueue.RetryPolicy(max_attempts=5, base_delay=30)
    async with (
        httpx.AsyncClient(transport=transport, base_url=MAIL_API) as client,
        trioqueue.open_worker_pool(backend, mail_handler(client), retry=retry),
    ):
        await queue.enqueue({"to": "ada@example.com"}, id="welcome-ada")
        await queue.enqueue({"to": "bob@example.invalid"}, id="welcome-bob")

    assert sent == ["ada@example.com"]
    ada = await queue.status("welcome-ada")
    bob = await queue.status("welcome-bob")
    assert ada is not None
    assert ada.state is trioqueue.JobState.COMPLETED
    assert bob is not None
    assert bob.state is trioqueue.JobState.DROPPED
    assert bob.reason == "refused: no such domain"


async def test_a_server_down_for_good_ends_in_the_dead_letters(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every attempt meets a 503: the job is a dead letter, with the last error."""
    sent, transport = fake_mail_server(busy_for=1000)
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    retry = trioqueue.RetryPolicy(max_attempts=3, base_delay=30)
    async with (
        httpx.AsyncClient(transport=transport, base_url=MAIL_API) as client,
        trioqueue.open_worker_pool(backend, mail_handler(client), retry=retry),
    ):
        await queue.enqueue({"to": "ada@example.com"}, id="welcome-ada")

    assert sent == []
    [dead] = await queue.dead_letters()
    assert dead.attempts == 3
    assert dead.last_error is not None
    assert dead.last_error.type == "httpx.HTTPStatusError"
