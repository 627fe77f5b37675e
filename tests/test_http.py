"""The HTTP service over a real socket: every status of POST /jobs, on memory and Redis."""

from __future__ import annotations

import datetime
import ssl
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h11
import pytest
import trio

import trioqueue
from trioqueue.http import create_app

from .http_server import UNREAD_BODY, served

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .redis_server import RedisServer

JSON = {"Content-Type": "application/json"}


TOKEN = "ingest-secret"  # a service's ingest token, for the fields that need one


@pytest.fixture(params=["memory", "redis"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[trioqueue.Backend]:
    """An open backend with room for 2 jobs: in memory, or a fresh queue on Redis."""
    if request.param == "memory":
        yield trioqueue.MemoryBackend(2)
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    queue = "{h-" + uuid.uuid4().hex[:10] + "}"
    async with trioqueue.RedisBackend(server.url, queue=queue, capacity=2, min_idle=30) as opened:
        yield opened


async def test_a_new_job_is_201_with_its_location_and_its_record(backend):
    async with served(create_app(backend)) as http:
        made = await http.post("/jobs", json={"id": "e1", "payload": {"n": 1}})
        assert made.status_code == 201
        assert made.headers["location"] == "/jobs/e1"
        assert made.json() == {
            "id": "e1",
            "deduplicated": False,
            "queued": True,
            "scheduled": False,
            "deferred": False,
            "state": "received",
        }
        record = (await http.get("/jobs/e1")).json()
        assert (record["state"], record["queued"], record["payload"]) == (
            "received",
            True,
            {"n": 1},
        )


async def test_mounted_under_a_path_the_location_is_under_it_too():
    from starlette.applications import Starlette
    from starlette.routing import Mount

    backend = trioqueue.MemoryBackend(2)
    outer = Starlette(routes=[Mount("/queue", app=create_app(backend))])
    async with served(outer) as http:
        made = await http.post("/queue/jobs", json={"id": "e1", "payload": 1})
        assert made.status_code == 201
        assert made.headers["location"] == "/queue/jobs/e1"
        assert (await http.get(made.headers["location"])).json()["id"] == "e1"


async def test_the_same_event_again_is_200_with_the_existing_record(backend):
    async with served(create_app(backend)) as http:
        await http.post("/jobs", json={"id": "e1", "payload": {"b": 2, "a": 1}})
        again = await http.post("/jobs", json={"payload": {"a": 1, "b": 2}, "id": "e1"})
        assert again.status_code == 200
        body = again.json()
        assert (body["id"], body["deduplicated"], body["state"]) == ("e1", True, "received")
        assert (await backend.stats()).enqueued == 1


async def test_the_same_id_with_another_payload_is_409_with_both_hashes(backend):
    async with served(create_app(backend)) as http:
        await http.post("/jobs", json={"id": "e1", "payload": 1})
        clash = await http.post("/jobs", json={"id": "e1", "payload": 2})
        assert clash.status_code == 409
        body = clash.json()
        assert body["error"] == "conflict"
        assert body["id"] == "e1"
        stored = await backend.status("e1")
        assert stored is not None
        assert body["stored_hash"] == stored.payload_hash != body["new_hash"]
        assert stored.payload == 1  # unchanged


async def test_a_full_queue_stores_the_event_unscheduled_with_202(backend):
    async with served(create_app(backend)) as http:
        for n in range(2):
            assert (await http.post("/jobs", json={"payload": n})).status_code == 201
        late = await http.post("/jobs", json={"id": "late", "payload": 3})
        assert late.status_code == 202
        assert late.json() == {
            "id": "late",
            "deduplicated": False,
            "queued": False,
            "scheduled": False,
            "deferred": False,
            "state": "received",
        }
        assert (await http.get("/jobs/late")).json()["queued"] is False
        done: list[Any] = []

        async def handler(job: trioqueue.Job) -> None:
            done.append(job.payload)

        async with trioqueue.open_worker_pool(backend, handler):
            pass  # the sweeper schedules the stored event once room frees
        assert sorted(done) == [0, 1, 3]


async def test_a_job_with_a_delay_or_a_due_time_is_202_and_scheduled(backend):
    async with served(create_app(backend)) as http:
        made = await http.post("/jobs", json={"id": "d1", "payload": 1, "delay": 3600})
        assert made.status_code == 202  # it exists, and is scheduled later
        assert made.json() == {
            "id": "d1",
            "deduplicated": False,
            "queued": False,
            "scheduled": True,
            "deferred": False,
            "state": "scheduled",
        }
        record = (await http.get("/jobs/d1")).json()
        assert record["state"] == "scheduled"
        due = datetime.datetime.fromisoformat(record["due_at"])
        created = datetime.datetime.fromisoformat(record["created_at"])
        assert abs((due - created).total_seconds() - 3600) < 1
        at = {"id": "d2", "payload": 2, "at": "2099-01-01T00:00:00+00:00"}
        assert (await http.post("/jobs", json=at)).json()["scheduled"]
        again = await http.post("/jobs", json={"id": "d1", "payload": 1})
        assert (again.status_code, again.json()["state"]) == (200, "scheduled")
        for body, words in (
            ({"payload": 1, "delay": "soon"}, '"delay" is seconds'),
            ({"payload": 1, "delay": -1}, "seconds >= 0"),
            ({"payload": 1, "delay": 1e308}, "more than 100 years"),
            ({"payload": 1, "at": "9999-12-31T23:59:59Z"}, "more than 100 years"),
            ({"payload": 1, "at": "2030-01-01T00:00:00"}, "no time zone"),
            ({"payload": 1, "at": "tomorrow"}, "ISO 8601"),
            ({"payload": 1, "delay": 5, "at": "2030-01-01T00:00:00Z"}, "not both"),
        ):
            refused = await http.post("/jobs", json=body)
            assert refused.status_code == 400, body
            assert refused.json()["error"] == "bad_delay", body
            assert words in refused.json()["message"], body
        assert (await backend.stats()).enqueued == 2


async def test_the_idempotency_key_header_names_the_job(backend):
    async with served(create_app(backend)) as http:
        made = await http.post("/jobs", json={"payload": 1}, headers={"Idempotency-Key": "k-1"})
        assert (made.status_code, made.json()["id"]) == (201, "k-1")
        clash = await http.post(
            "/jobs", json={"id": "other", "payload": 1}, headers={"Idempotency-Key": "k-1"}
        )
        assert clash.status_code == 400
        assert "differ" in clash.json()["message"]


@pytest.mark.parametrize(
    ("body", "kind", "said"),
    [
        (b"{not json", "bad_json", "not JSON"),
        (b'{"id": "x"}', "bad_job", '"payload"'),
        (b"[1, 2]", "bad_job", '"payload"'),
        (b'{"payload": 1, "extra": 2}', "bad_job", "unknown fields ['extra']"),
        (b'{"id": 5, "payload": 1}', "bad_id", "must be a string"),
        (b'{"id": "", "payload": 1}', "bad_job", "1 to 256 characters"),
        (b'{"id": "' + b"x" * 300 + b'", "payload": 1}', "bad_job", "1 to 256 characters"),
    ],
)
async def test_bad_input_is_400_saying_what_is_wrong_and_stores_nothing(backend, body, kind, said):
    async with served(create_app(backend)) as http:
        refused = await http.post("/jobs", content=body, headers=JSON)
        assert refused.status_code == 400
        assert refused.json()["error"] == kind
        assert said in refused.json()["message"]
    assert (await backend.stats()).enqueued == 0


@UNREAD_BODY
async def test_a_body_over_max_body_is_413_whether_its_length_is_said_or_not(backend):
    async with served(create_app(backend, max_body=100)) as http:
        big = b'{"payload": "' + b"x" * 200 + b'"}'
        said = await http.post("/jobs", content=big, headers=JSON)
        assert said.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            for start in range(0, len(big), 50):
                yield big[start : start + 50]

        streamed = await http.post("/jobs", content=chunks(), headers=JSON)
        assert streamed.status_code == 413
        assert "100 bytes" in streamed.json()["message"]
    assert (await backend.stats()).enqueued == 0


async def _answer_to(
    http: Any, headers: list[tuple[str, str]], body: bytes | None
) -> tuple[h11.Response, bool]:
    """POST /jobs with *headers* and *body* (None: the body is held back) on a socket
    of its own; the answer, and whether the server then closed the connection. Fails,
    naming the defect, if the server waits instead of answering."""
    url = http.base_url
    client = h11.Connection(h11.CLIENT)
    sent = client.send(
        h11.Request(method="POST", target="/jobs", headers=[("Host", "x"), *headers])
    )
    if body is not None:
        sent += client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage())
    answer: h11.Response | None = None
    async with await trio.open_tcp_stream(url.host, url.port) as stream:
        await stream.send_all(sent)
        with trio.move_on_after(10):  # a bound on a hang, not a timing
            while not isinstance(event := client.next_event(), h11.EndOfMessage):
                if event is h11.NEED_DATA:
                    client.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    answer = event
        if answer is None:
            pytest.fail("the server gave no answer in 10 s to a request it could answer")
        with trio.move_on_after(10):
            while await stream.receive_some(65536):
                pass
            return answer, True
    return answer, False


async def test_a_413_before_the_body_is_sent_answers_at_once_and_closes(backend):
    """A client that waits to be let send its body (``Expect: 100-continue``) gets
    its 413 from the length it declared, and the connection is not left half read."""
    async with served(create_app(backend, max_body=100)) as http:
        said = [("Content-Type", "application/json"), ("Content-Length", "5000")]
        answer, closed = await _answer_to(http, [*said, ("Expect", "100-continue")], None)
        assert answer.status_code == 413
        assert (b"connection", b"close") in answer.headers
        assert closed, "the server kept a connection whose body it did not read"
        assert (await http.get("/healthz")).status_code == 200
    assert (await backend.stats()).enqueued == 0


async def test_a_413_cut_short_in_the_body_says_the_connection_closes(backend):
    """A body read only up to max_body leaves the rest on the connection: the answer
    says ``Connection: close`` so that a client does not send the next request there."""
    async with served(create_app(backend, max_body=100)) as http:
        body = b'{"payload": "' + b"x" * 300_000 + b'"}'
        chunked = [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]
        answer, closed = await _answer_to(http, chunked, body)
        assert answer.status_code == 413
        assert (b"connection", b"close") in answer.headers
        assert closed
    assert (await backend.stats()).enqueued == 0


async def test_an_answer_to_a_whole_body_keeps_the_connection(backend):
    """A 415 comes after the whole (small) body was read: the connection stays usable."""
    async with served(create_app(backend, max_body=1000)) as http:
        body = b'{"payload": 1}'
        said = [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
        answer, _ = await _answer_to(http, said, body)
        assert answer.status_code == 415
        assert (b"connection", b"close") not in answer.headers


async def test_an_unknown_job_is_404(backend):
    async with served(create_app(backend)) as http:
        missing = await http.get("/jobs/nope")
        assert missing.status_code == 404
        assert missing.json()["error"] == "not_found"


async def test_health_readiness_stats_and_the_openapi_document(backend):
    async with served(create_app(backend)) as http:
        await http.post("/jobs", json={"payload": 1})
        assert (await http.get("/healthz")).json() == {"alive": True}
        assert (await http.get("/readyz")).json() == {"ready": True}
        stats = (await http.get("/stats")).json()
        assert (stats["enqueued"], stats["gauges"]["queue_depth"]) == (1, 1)
        document = (await http.get("/openapi.json")).json()
        assert document["openapi"] == "3.1.0"
        statuses = set(document["paths"]["/jobs"]["post"]["responses"])
        assert statuses == {
            "200", "201", "202", "400", "401", "403", "409", "413", "415", "422", "503"
        }  # fmt: skip


async def test_an_unreachable_redis_is_503_with_retry_after():
    dead = "redis://127.0.0.1:1"  # nothing listens on port 1
    async with (
        trioqueue.RedisBackend(dead, queue="{h}", min_idle=30) as backend,
        served(create_app(backend)) as http,
    ):
        refused = await http.post("/jobs", json={"id": "e1", "payload": 1})
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert "send it again" in refused.json()["message"]
        assert (await http.get("/readyz")).status_code == 503
        assert (await http.get("/healthz")).status_code == 200


async def test_a_503_says_what_to_do_and_never_where_the_backend_is(caplog):
    ca = ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    dead = f"rediss://worker:s3cret@127.0.0.1:1/0?ssl_ca_certs={ca}"
    async with (
        trioqueue.RedisBackend(dead, queue="{h}", min_idle=30) as backend,
        served(create_app(backend)) as http,
    ):
        answers = [
            await http.post("/jobs", json={"id": "e1", "payload": 1}),
            await http.post("/jobs/batch", json={"jobs": [{"payload": 1}]}),
            await http.get("/jobs/e1"),
            await http.get("/stats"),
            await http.get("/readyz"),
        ]
    for answer in answers:
        assert answer.status_code == 503
        body = answer.text
        for secret in ("127.0.0.1", "worker", "s3cret", Path(ca).name, ":1/"):
            assert secret not in body, (answer.url, body)
        assert "the queue's backend cannot be reached now" in answer.json()["message"]
    assert "127.0.0.1:1" in caplog.text  # the operator's log has where it was


async def test_the_dashboard_may_not_be_framed_or_sniffed():
    async with served(create_app(trioqueue.MemoryBackend(2))) as http:
        page = await http.get("/")
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert page.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("job_id", [r"a\nb", r"tab\there", r"bell\u0007", r"del\u007f"])
async def test_an_id_no_url_can_carry_is_400_and_nothing_is_stored(job_id):
    backend = trioqueue.MemoryBackend(2)
    async with served(create_app(backend)) as http:
        body = '{"id": "' + job_id + '", "payload": 1}'  # the JSON escape as the client sent it
        refused = await http.post("/jobs", content=body.encode(), headers=JSON)
        batch = '{"jobs": [{"id": "' + job_id + '", "payload": 1}]}'
        refused_batch = await http.post("/jobs/batch", content=batch.encode(), headers=JSON)
    assert (refused.status_code, refused.json()["error"]) == (400, "bad_id")
    assert "control character" in refused.json()["message"]
    assert (refused_batch.status_code, refused_batch.json()["error"]) == (400, "bad_id")
    assert (await backend.stats()).enqueued == 0


class _Stuck(trioqueue.MemoryBackend):
    """A backend whose enqueue never returns (a stand-in for a hung store)."""

    async def add(self, job: trioqueue.NewJob, mode: trioqueue.AddMode) -> trioqueue.Receipt:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_request_past_its_timeout_is_503_and_stores_nothing():
    backend = _Stuck(10)
    async with served(create_app(backend, request_timeout=0.2)) as http:
        late = await http.post("/jobs", json={"id": "e1", "payload": 1})
        assert late.status_code == 503
        assert late.json()["error"] == "timeout"
        assert late.headers["retry-after"] == "1"
    assert await backend.status("e1") is None


async def test_slow_uploads_hold_no_place_and_a_fast_client_is_served_beside_them():
    backend = trioqueue.MemoryBackend(10)
    app = create_app(backend, concurrency=2, request_timeout=60)
    async with served(app) as http:
        host, port = http.base_url.host, http.base_url.port
        slow = []
        for n in range(8):  # four times the places, each sending half its body, then nothing
            stream = await trio.open_tcp_stream(host, port)
            body = b'{"id": "slow%d", "payload": "%s"}' % (n, b"x" * 1000)
            head = (
                f"POST /jobs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            await stream.send_all(head.encode() + body[: len(body) // 2])
            slow.append((stream, body[len(body) // 2 :]))
        with trio.fail_after(30):  # half the request timeout the slow ones would hold
            made = await http.post("/jobs", json={"id": "fast", "payload": 1})
        assert made.status_code == 201
        for stream, rest in slow:  # the slow ones finish too, once their bodies are whole
            await stream.send_all(rest)
            with trio.fail_after(30):
                assert (await stream.receive_some()).startswith(b"HTTP/1.1 201")
            await stream.aclose()
    assert (await backend.stats()).enqueued == 9


def test_limits_must_be_positive():
    with pytest.raises(trioqueue.ConfigurationError, match="max_body"):
        create_app(trioqueue.MemoryBackend(1), max_body=0)


async def test_a_batch_is_checked_whole_then_stored_with_one_result_per_job(backend):
    async with served(create_app(backend)) as http:
        await http.post("/jobs", json={"id": "old", "payload": 1})
        bad = await http.post(
            "/jobs/batch", json={"jobs": [{"id": "a", "payload": 1}, {"id": 7, "payload": 2}]}
        )
        assert bad.status_code == 400
        assert "job 1" in bad.json()["message"]
        assert await backend.status("a") is None  # nothing of a bad batch is stored
        done = await http.post(
            "/jobs/batch",
            json={
                "jobs": [
                    {"id": "a", "payload": 1},  # new: the queue has room for one more
                    {"id": "old", "payload": 1},  # the same again
                    {"id": "old", "payload": 2},  # another payload
                    {"id": "b", "payload": 3},  # new, past the capacity of 2
                ]
            },
        )
        assert done.status_code == 200
        results = done.json()["results"]
        assert [(r["id"], r["status"]) for r in results] == [
            ("a", 201),
            ("old", 200),
            ("old", 409),
            ("b", 202),
        ]
        assert results[2]["stored_hash"] != results[2]["new_hash"]


async def test_a_batch_job_may_be_due_later_and_a_bad_due_time_refuses_the_batch(backend):
    async with served(create_app(backend)) as http:
        bad = await http.post(
            "/jobs/batch",
            json={"jobs": [{"id": "a", "payload": 1}, {"id": "b", "payload": 2, "delay": -1}]},
        )
        assert (bad.status_code, bad.json()["error"]) == (400, "bad_delay")
        assert "job 1 of the batch (nothing was stored)" in bad.json()["message"]
        assert await backend.status("a") is None
        wrong_type = await http.post("/jobs/batch", json={"jobs": [{"payload": 1, "at": "soon"}]})
        assert (wrong_type.status_code, wrong_type.json()["error"]) == (400, "bad_delay")
        assert wrong_type.json()["message"].startswith('job 0: "at" is an ISO 8601 time')
        done = await http.post(
            "/jobs/batch",
            json={
                "jobs": [
                    {"id": "later", "payload": 1, "delay": 3600},
                    {"id": "at", "payload": 2, "at": "2099-01-01T00:00:00+00:00"},
                    {"id": "now", "payload": 3},
                ]
            },
        )
        results = done.json()["results"]
        assert [(r["id"], r["status"], r["scheduled"]) for r in results] == [
            ("later", 202, True),
            ("at", 202, True),
            ("now", 201, False),
        ]
        record = (await http.get("/jobs/at")).json()
        assert (record["state"], record["due_at"]) == ("scheduled", "2099-01-01T00:00:00.000Z")


async def test_a_job_may_carry_its_own_attempts_and_handler_timeout(backend):
    async with served(create_app(backend)) as http:
        one = await http.post(
            "/jobs",
            json={
                "id": "o",
                "payload": 1,
                "max_attempts": 2,
                "handler_timeout": 1.5,
                "task": "resize",
            },
        )
        assert one.status_code == 201
        batch = await http.post(
            "/jobs/batch", json={"jobs": [{"id": "b", "payload": 2, "max_attempts": 4}]}
        )
        assert batch.json()["results"][0]["status"] == 201
        for body, words in (
            ({"payload": 1, "max_attempts": 0}, "at least one attempt"),
            ({"payload": 1, "max_attempts": True}, "whole number"),
            ({"payload": 1, "handler_timeout": -2}, "more than 0"),
        ):
            refused = await http.post("/jobs", json=body)
            assert (refused.status_code, refused.json()["error"]) == (400, "bad_job"), body
            assert words in refused.json()["message"], body
        refused = await http.post(
            "/jobs/batch", json={"jobs": [{"payload": 1, "handler_timeout": "soon"}]}
        )
        assert refused.status_code == 400
        assert "job 0 of the batch" in refused.json()["message"]
    claims = await backend.claim(2, lease=30, block=0)
    options = {c.job.id: (c.job.max_attempts, c.job.handler_timeout, c.job.task) for c in claims}
    assert options == {"o": (2, 1.5, "resize"), "b": (4, None, None)}


async def test_a_job_may_carry_headers_that_its_record_and_its_handler_see(backend):
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    async with served(create_app(backend, ingest_token=TOKEN), TOKEN) as http:
        posted = await http.post("/jobs", json={"id": "h1", "payload": 1, "headers": headers})
        assert posted.status_code == 201
        assert (await http.get("/jobs/h1")).json()["headers"] == headers
        batch = await http.post(
            "/jobs/batch", json={"jobs": [{"id": "h2", "payload": 2, "headers": {"t": "a"}}]}
        )
        assert batch.json()["results"][0]["status"] == 201
        for bad, words in (({"n": 1}, "str to str"), ("x", "a dict")):
            refused = await http.post("/jobs", json={"payload": 1, "headers": bad})
            assert (refused.status_code, refused.json()["error"]) == (400, "bad_job"), bad
            assert words in refused.json()["message"], bad
    claims = await backend.claim(2, lease=30, block=0)
    assert {c.job.id: c.job.headers for c in claims} == {"h1": headers, "h2": {"t": "a"}}


async def test_a_job_after_a_failed_one_is_202_and_says_it_is_a_dead_letter(backend):
    async def handler(job: trioqueue.Job) -> None:
        raise RuntimeError("broken")

    queue = trioqueue.Queue(backend)
    await queue.enqueue("p", id="bad", max_attempts=1)
    async with trioqueue.open_worker_pool(backend, handler) as pool:
        pool.mark_producer_finished()
    async with served(create_app(backend, ingest_token=TOKEN), TOKEN) as http:
        posted = await http.post("/jobs", json={"id": "k", "payload": 1, "after": ["bad"]})
        assert posted.status_code == 202
        assert posted.json() == {
            "id": "k",
            "deduplicated": False,
            "queued": False,
            "scheduled": False,
            "deferred": False,
            "state": "failed",
        }
        record = (await http.get("/jobs/k")).json()
        assert record["state"] == "failed"
        assert "'bad', which failed" in record["reason"]
        batch = await http.post("/jobs/batch", json={"jobs": [{"payload": 2, "after": ["bad"]}]})
        [answer] = batch.json()["results"]
        assert (answer["status"], answer["state"]) == (202, "failed")


async def test_a_job_may_run_after_others_and_an_unknown_one_is_422(backend):
    async with served(create_app(backend, ingest_token=TOKEN), TOKEN) as http:
        assert (await http.post("/jobs", json={"id": "first", "payload": 1})).status_code == 201
        posted = await http.post("/jobs", json={"id": "then", "payload": 2, "after": ["first"]})
        assert posted.status_code == 202
        assert posted.json() == {
            "id": "then",
            "deduplicated": False,
            "queued": False,
            "scheduled": False,
            "deferred": True,
            "state": "deferred",
        }
        record = (await http.get("/jobs/then")).json()
        assert (record["state"], record["after"]) == ("deferred", ["first"])
        unknown = await http.post("/jobs", json={"id": "lost", "payload": 3, "after": ["ghost"]})
        assert unknown.status_code == 422
        assert unknown.json()["error"] == "unknown_after"
        assert (unknown.json()["id"], unknown.json()["after"]) == ("lost", "ghost")
        assert (await http.get("/jobs/lost")).status_code == 404  # nothing was stored
        batch = await http.post(
            "/jobs/batch",
            json={
                "jobs": [
                    {"id": "b1", "payload": 4, "after": ["then"]},
                    {"id": "b2", "payload": 5, "after": ["ghost"]},
                ]
            },
        )
        first, second = batch.json()["results"]
        assert (first["status"], first["deferred"]) == (202, True)
        assert (second["status"], second["error"], second["after"]) == (
            422,
            "unknown_after",
            "ghost",
        )
        for bad, words in (("first", "a list of job ids"), (["then"], "cannot run after itself")):
            refused = await http.post("/jobs", json={"id": "then", "payload": 2, "after": bad})
            assert (refused.status_code, refused.json()["error"]) == (400, "bad_job"), bad
            assert words in refused.json()["message"], bad
        both = await http.post("/jobs", json={"payload": 1, "after": ["first"], "delay": 5})
        assert both.status_code == 400
        assert "not both" in both.json()["message"]


async def test_a_unique_key_answers_with_the_job_that_holds_it(backend):
    async with served(create_app(backend, ingest_token=TOKEN), TOKEN) as http:
        made = await http.post("/jobs", json={"id": "u1", "payload": 1, "unique_key": "k"})
        assert made.status_code == 201
        found = await http.post("/jobs", json={"id": "u2", "payload": 2, "unique_key": "k"})
        assert found.status_code == 200
        assert (found.json()["id"], found.json()["deduplicated"]) == ("u1", True)
        assert found.json()["unique_key"] == "k"
        bounced = await http.post(
            "/jobs/batch",
            json={
                "jobs": [
                    {"id": "d1", "payload": 1, "unique_key": "d", "debounce": 5},
                    {"id": "d2", "payload": 2, "unique_key": "d", "debounce": 5},
                ]
            },
        )
        assert [r["status"] for r in bounced.json()["results"]] == [202, 202]
        assert (await http.get("/jobs/d1")).json()["state"] == "cancelled"
        refused = await http.post("/jobs", json={"payload": 1, "debounce": 5})
        assert (refused.status_code, refused.json()["error"]) == (400, "bad_job")
        assert "needs a unique_key" in refused.json()["message"]


async def test_a_rate_key_is_kept_with_the_job_and_checked(backend):
    async with served(create_app(backend, ingest_token=TOKEN), TOKEN) as http:
        made = await http.post("/jobs", json={"id": "r1", "payload": 1, "rate_key": "acme"})
        assert made.status_code == 201
        assert (await http.get("/jobs/r1")).json()["rate_key"] == "acme"
        batch = await http.post(
            "/jobs/batch", json={"jobs": [{"id": "r2", "payload": 2, "rate_key": "acme"}]}
        )
        assert [r["status"] for r in batch.json()["results"]] == [201]
        assert (await http.get("/jobs/r2")).json()["rate_key"] == "acme"
        refused = await http.post("/jobs", json={"payload": 1, "rate_key": ""})
        assert (refused.status_code, refused.json()["error"]) == (400, "bad_job")
        assert "a rate_key" in refused.json()["message"]


async def test_the_jobs_of_a_place_page_by_page_and_a_scheduled_one_runs_now(backend):
    queue = trioqueue.Queue(backend)
    for n in range(5):
        await queue.enqueue(n, id=f"later-{n}", delay=3600 + n)
    await queue.enqueue(9, id="ready-1")
    async with served(create_app(backend, admin_token="t")) as http:
        admin = {"Authorization": "Bearer t"}
        assert (await http.get("/jobs?place=scheduled")).status_code == 401  # reads need it
        first = await http.get("/jobs?place=scheduled&limit=2", headers=admin)
        assert first.status_code == 200
        page = first.json()
        assert (page["place"], page["next"]) == ("scheduled", "2")
        assert [job["id"] for job in page["jobs"]] == ["later-0", "later-1"]
        assert page["jobs"][0]["state"] == "scheduled"
        assert page["jobs"][0]["due_at"] is not None
        assert set(page["jobs"][0]) == {
            "id", "state", "attempts", "priority", "queued", "due_at", "updated_at",
            "reason", "task", "after", "unique_key", "rate_key",
        }  # fmt: skip
        rest = (await http.get("/jobs?place=scheduled&limit=2&cursor=4", headers=admin)).json()
        assert ([job["id"] for job in rest["jobs"]], rest["next"]) == (["later-4"], None)
        for query, kind in (
            ("place=running", "bad_place"),
            ("place=ready&limit=0", "bad_page"),
            ("place=ready&cursor=x", "bad_page"),
            ("place=ready&cursor=9990&limit=50", "bad_page"),
        ):
            refused = await http.get(f"/jobs?{query}", headers=admin)
            assert (refused.status_code, refused.json()["error"]) == (400, kind), query
        # running one now: the token, and only a job waiting for its due time
        assert (await http.post("/jobs/later-3/run")).status_code == 401
        ran = await http.post("/jobs/later-3/run", headers=admin)
        assert (ran.status_code, ran.json()["state"], ran.json()["queued"]) == (
            200,
            "received",
            True,
        )
        assert (await http.post("/jobs/ready-1/run", headers=admin)).status_code == 404
        ready = (await http.get("/jobs?place=ready", headers=admin)).json()
        assert [job["id"] for job in ready["jobs"]] == ["ready-1", "later-3"]


async def test_a_job_may_carry_a_priority_that_its_record_shows(backend):
    async with served(create_app(backend, ingest_token=TOKEN), TOKEN) as http:
        for body in ({"id": "plain", "payload": 1}, {"id": "urgent", "payload": 2, "priority": 2}):
            assert (await http.post("/jobs", json=body)).status_code == 201, body
        assert (await http.get("/jobs/urgent")).json()["priority"] == 2
        claims = await backend.claim(2, lease=30, block=0)
        assert [(c.job.id, c.job.priority) for c in claims] == [("urgent", 2), ("plain", 0)]
        null = await http.post("/jobs", json={"id": "null", "payload": 3, "priority": None})
        assert null.status_code == 201
        batch = await http.post(
            "/jobs/batch", json={"jobs": [{"id": "bulk", "payload": 4, "priority": -2}]}
        )
        assert batch.json()["results"][0]["status"] == 201
        for body, words in (
            ({"payload": 1, "priority": 3}, "from -2 to 2"),
            ({"payload": 1, "priority": "high"}, "whole number"),
        ):
            refused = await http.post("/jobs", json=body)
            assert (refused.status_code, refused.json()["error"]) == (400, "bad_job"), body
            assert words in refused.json()["message"], body
    claims = await backend.claim(2, lease=30, block=0)
    assert [(c.job.id, c.job.priority) for c in claims] == [("null", 0), ("bulk", -2)]


async def _dead_letters(backend: trioqueue.Backend, count: int) -> None:
    """Make *count* dead letters d0, d1, ...: one attempt each, failing.

    They are enqueued while the pool runs: more than the backend's capacity wait for room.
    """

    async def failing(job: trioqueue.Job) -> None:
        raise RuntimeError("broken on purpose")

    policy = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.open_worker_pool(backend, failing, retry=policy):
        await trioqueue.Queue(backend).enqueue_many(
            list(range(count)), ids=[f"d{n}" for n in range(count)]
        )


async def test_a_completed_jobs_record_holds_what_its_handler_returned(backend):
    async def total(job: trioqueue.Job) -> object:
        return {"total": sum(job.payload)} if job.id == "sum" else {1, 2}

    async with served(create_app(backend)) as http:
        for job_id in ("sum", "set"):
            posted = await http.post("/jobs", json={"id": job_id, "payload": [1, 2, 3]})
            assert posted.status_code == 201
        async with trioqueue.open_worker_pool(backend, total):
            pass
        done = (await http.get("/jobs/sum")).json()
        assert (done["state"], done["result"], done["result_error"]) == (
            "completed",
            {"total": 6},
            None,
        )
        odd = (await http.get("/jobs/set")).json()
        assert (odd["state"], odd["result"]) == ("completed", None)
        assert "must be JSON-serialisable" in odd["result_error"]


async def test_delete_cancels_a_job_with_the_admin_token(backend):
    queue = trioqueue.Queue(backend)
    await queue.enqueue("b", id="done")

    held_runs = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        if job.id == "held":
            held_runs.set()
            await trio.sleep(3600)

    async with trioqueue.open_worker_pool(backend, handler):
        pass  # "done" is done
    await queue.enqueue("c", id="held")
    await queue.enqueue("d", id="queued")
    token = {"Authorization": "Bearer s3cret"}
    async with served(create_app(backend, admin_token="s3cret")) as http:
        assert (await http.delete("/jobs/queued")).status_code == 401  # no token
        cancelled = await http.delete("/jobs/queued", headers=token)
        assert cancelled.status_code == 200
        assert cancelled.json() == {"id": "queued", "cancel": "cancelled", "state": "cancelled"}
        queued = await http.get("/jobs/queued", headers=token)
        assert queued.json()["state"] == "cancelled"
        finished = await http.delete("/jobs/done", headers=token)
        assert finished.status_code == 409
        assert (finished.json()["error"], finished.json()["state"]) == ("finished", "completed")
        assert (await http.delete("/jobs/nobody", headers=token)).status_code == 404
        async with trioqueue.open_worker_pool(backend, handler) as pool:
            await held_runs.wait()
            requested = await http.delete("/jobs/held", headers=token)
            assert requested.status_code == 202
            assert requested.json()["cancel"] == "requested"
            with trio.fail_after(10):
                with pytest.raises(trioqueue.JobCancelled):
                    await queue.result("held")
            await pool.shutdown(5)
    async with served(create_app(backend)) as http:  # no token configured: off
        off = await http.delete("/jobs/held")
        assert off.status_code == 403
        assert "cancelling" in off.json()["message"]


async def test_dead_letters_are_listed_openly_and_changed_only_with_the_token(backend):
    await _dead_letters(backend, 2)
    async with served(create_app(backend)) as http:  # no token: changes are off
        listed = (await http.get("/dead")).json()["dead"]
        assert sorted(record["id"] for record in listed) == ["d0", "d1"]
        assert listed[0]["last_error"]["type"] == "RuntimeError"
        off = await http.post("/dead/d0/requeue")
        assert off.status_code == 403
        assert "--admin-token" in off.json()["message"]
    secret = {"Authorization": "Bearer s3cret"}
    async with served(create_app(backend, admin_token="s3cret")) as http:
        assert (await http.post("/dead/d0/requeue")).status_code == 401
        wrong = await http.post("/dead/d0/requeue", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        requeued = await http.post("/dead/d0/requeue", headers=secret)
        assert (requeued.status_code, requeued.json()["state"]) == (200, "received")
        assert (await http.post("/dead/d0/requeue", headers=secret)).status_code == 404
        assert (await http.delete("/dead/d1", headers=secret)).json() == {"purged": 1}
        assert (await http.delete("/dead/d1", headers=secret)).status_code == 404
    await _dead_letters(backend, 0)  # d0 runs again, and fails again
    async with served(create_app(backend, admin_token="s3cret")) as http:
        assert (await http.post("/dead/requeue", headers=secret)).json() == {"requeued": ["d0"]}
        assert (await http.delete("/dead", headers=secret)).json() == {"purged": 0}


async def test_pause_and_resume_need_the_token_and_stats_say_whether_paused(backend):
    async with served(create_app(backend)) as http:  # no token: changes are off
        assert (await http.get("/stats")).json()["paused"] is False
        assert (await http.get("/stats")).json()["rate_limits"] == {"queue": None, "per_key": None}
        await trioqueue.Queue(backend).set_rate_limits(per_key=trioqueue.RateLimit(3, per=60))
        limits = (await http.get("/stats")).json()["rate_limits"]
        assert limits == {"queue": None, "per_key": "3/60s"}
        off = await http.post("/queue/pause")
        assert off.status_code == 403
        assert not await backend.is_paused()
    secret = {"Authorization": "Bearer s3cret"}
    async with served(create_app(backend, admin_token="s3cret")) as http:
        assert (await http.post("/queue/pause")).status_code == 401
        assert not await backend.is_paused()
        paused = await http.post("/queue/pause", headers=secret)
        assert (paused.status_code, paused.json()) == (200, {"paused": True})
        assert await backend.is_paused()
        assert (await http.get("/stats")).json()["paused"] is True
        # a paused queue still takes jobs in
        made = await http.post("/jobs", json={"id": "p1", "payload": 1}, headers=secret)
        assert made.status_code == 201
        resumed = await http.post("/queue/resume", headers=secret)
        assert (resumed.status_code, resumed.json()) == (200, {"paused": False})
        assert not await backend.is_paused()
        assert (await http.get("/queue/pause")).status_code == 405


async def test_with_a_token_reading_jobs_needs_it_and_counters_do_not(backend):
    await _dead_letters(backend, 1)
    secret = {"Authorization": "Bearer s3cret"}
    async with served(create_app(backend, admin_token="s3cret")) as http:
        made = await http.post("/jobs", json={"id": "e1", "payload": {"card": "4111"}})
        assert made.status_code == 401  # the admin token alone: sending needs it too
        made = await http.post(
            "/jobs", json={"id": "e1", "payload": {"card": "4111"}}, headers=secret
        )
        assert made.status_code == 201
        for path in ("/jobs/e1", "/jobs/d0", "/dead"):
            for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "s3cret"}):
                refused = await http.get(path, headers=headers)
                assert refused.status_code == 401, (path, headers)
                assert refused.headers["www-authenticate"] == "Bearer"
                assert "4111" not in refused.text
                assert "Authorization: Bearer" in refused.json()["message"]
        assert (await http.get("/jobs/e1", headers=secret)).json()["payload"] == {"card": "4111"}
        assert [r["id"] for r in (await http.get("/dead", headers=secret)).json()["dead"]] == ["d0"]
        again = await http.post(
            "/jobs", json={"id": "e1", "payload": {"card": "4111"}}, headers=secret
        )
        assert (again.json()["state"], again.json()["deduplicated"]) == ("received", True)
        for path in ("/stats", "/metrics", "/healthz", "/readyz", "/openapi.json", "/"):
            assert (await http.get(path)).status_code == 200, path


async def test_with_tokens_set_an_anonymous_client_sends_nothing_and_learns_nothing(backend):
    admin, ingest = {"Authorization": "Bearer s3cret"}, {"Authorization": "Bearer in-token"}
    app = create_app(backend, admin_token="s3cret", ingest_token="in-token")
    async with served(app) as http:
        made = await http.post(
            "/jobs", json={"id": "e1", "payload": "trusted", "unique_key": "k"}, headers=ingest
        )
        assert made.status_code == 201
        tries = [  # what once told an anonymous client about other jobs, or replaced them
            ("/jobs", {"payload": "plain"}),
            ("/jobs", {"id": "e1", "payload": "trusted"}),  # a repeated id: its flags
            ("/jobs", {"id": "e1", "payload": "other"}),  # a conflict: the stored hash
            ("/jobs", {"payload": 1, "after": ["e1"]}),  # 202: e1 exists
            ("/jobs", {"payload": 1, "after": ["nobody"]}),  # 422: it does not
            ("/jobs", {"payload": 1, "unique_key": "k"}),  # the holder's id and state
            ("/jobs", {"payload": "evil", "unique_key": "k", "debounce": 5}),  # replaces it
            ("/jobs", {"payload": 1, "priority": 2, "headers": {"traceparent": "00-x"}}),
            ("/jobs", "not even an object"),
            ("/jobs/batch", {"jobs": [{"id": "e1", "payload": "other"}]}),
        ]
        answers = set()
        for path, body in tries:
            for headers in ({}, {"Authorization": "Bearer nope"}):
                refused = await http.post(path, json=body, headers=headers)
                assert refused.status_code == 401, (path, body)
                answers.add(refused.text)
        assert len(answers) == 1  # the same answer to every try: nothing to learn from it
        assert "ingest token" in answers.pop()
        # nothing was stored or changed
        record = (await http.get("/jobs/e1", headers=admin)).json()
        assert (record["payload"], record["unique_key"], record["state"]) == (
            "trusted",
            "k",
            "received",
        )
        assert (await http.get("/stats")).json()["gauges"]["queue_depth"] == 1
        # the ingest token sends jobs, all fields included, but reads nothing
        keyed = await http.post("/jobs", json={"payload": 2, "unique_key": "k"}, headers=ingest)
        assert (keyed.status_code, keyed.json()["id"]) == (200, "e1")
        assert "state" not in keyed.json()  # the receipt, not the record
        assert (await http.get("/jobs/e1", headers=ingest)).status_code == 401
        later = await http.post("/jobs", json={"payload": 3, "after": ["e1"]}, headers=ingest)
        assert later.status_code == 202


async def test_without_a_token_the_fields_that_act_on_other_jobs_are_refused(backend):
    async with served(create_app(backend)) as http:
        held = await http.post("/jobs", json={"id": "e1", "payload": "mine"})
        assert held.status_code == 201
        for field, value in (
            ("unique_key", "k"),
            ("after", ["e1"]),
            ("rate_key", "acme"),
            ("headers", {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
            ("priority", 2),
        ):
            refused = await http.post("/jobs", json={"payload": 1, field: value})
            assert refused.status_code == 403, field
            assert refused.json()["error"] == "needs_token"
            assert "--ingest-token" in refused.json()["message"]
            batch = await http.post("/jobs/batch", json={"jobs": [{"payload": 1, field: value}]})
            assert batch.status_code == 403, field
        debounced = {"payload": 1, "unique_key": "k", "debounce": 5}
        assert (await http.post("/jobs", json=debounced)).status_code == 403
        # null fields and priority 0 are what a plain job has
        plain = {"payload": 2, "priority": 0, "after": None, "headers": None}
        assert (await http.post("/jobs", json=plain)).status_code == 201
        assert (await http.get("/stats")).json()["gauges"]["queue_depth"] == 2


async def test_records_show_an_errors_traceback_only_when_the_app_is_told_to(backend):
    await _dead_letters(backend, 1)
    async with served(create_app(backend)) as http:
        for shown in (
            (await http.get("/jobs/d0")).json(),
            (await http.get("/dead")).json()["dead"][0],
        ):
            assert shown["last_error"] == {
                "type": "RuntimeError",
                "message": "broken on purpose",
                "attempt": 1,
            }
    async with served(create_app(backend, tracebacks=True)) as http:
        error = (await http.get("/jobs/d0")).json()["last_error"]
        assert "Traceback (most recent call last)" in error["traceback"]
        assert "broken on purpose" in error["traceback"]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (None, b'{"payload": 1}'),
        ("text/plain", b'{"payload": 1}'),
        ("application/x-www-form-urlencoded", b"payload=1"),
        (
            "multipart/form-data; boundary=b",
            b'--b\r\nContent-Disposition: form-data; name="payload"\r\n\r\n1\r\n--b--\r\n',
        ),
        ("application/jsonp", b'{"payload": 1}'),
    ],
)
async def test_a_body_not_declared_json_is_415_and_stores_nothing(backend, content_type, body):
    headers = {"Content-Type": content_type} if content_type else {}
    async with served(create_app(backend)) as http:
        for path, sent in (("/jobs", body), ("/jobs/batch", b'{"jobs": [' + body + b"]}")):
            refused = await http.post(path, content=sent, headers=headers)
            assert (refused.status_code, refused.json()["error"]) == (415, "not_json"), path
            assert "Content-Type: application/json" in refused.json()["message"]
    assert (await backend.stats()).enqueued == 0


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", "application/vnd.a+json"],
)
async def test_json_by_any_of_its_names_is_taken(content_type):
    backend = trioqueue.MemoryBackend(2)
    async with served(create_app(backend)) as http:
        made = await http.post(
            "/jobs", content=b'{"payload": 1}', headers={"Content-Type": content_type}
        )
    assert made.status_code == 201


async def test_with_allowed_hosts_a_request_naming_another_host_is_400_and_stores_nothing():
    backend = trioqueue.MemoryBackend(2)
    async with served(create_app(backend, allowed_hosts=["jobs.example", "localhost"])) as http:
        for host in ("evil.example", "jobs.example.evil.example", "localhost.evil.example"):
            refused = await http.post("/jobs", json={"payload": 1}, headers={"Host": host})
            assert (refused.status_code, refused.json()["error"]) == (400, "bad_host"), host
            assert f"--allowed-host {host}" in refused.json()["message"]
            assert (await http.get("/stats", headers={"Host": host})).status_code == 400
        assert (await backend.stats()).enqueued == 0
        for host in (
            "jobs.example",
            "JOBS.example.:8000",
            "localhost:1",
            "127.0.0.1:5",
            "[::1]:80",
            "10.1.2.3",
        ):
            made = await http.post("/jobs", json={"payload": 1}, headers={"Host": host})
            assert made.status_code in (201, 202), host
    async with served(create_app(backend)) as http:  # None: the server in front checks
        assert (await http.get("/stats", headers={"Host": "any.example"})).status_code == 200


async def test_dead_letters_come_in_pages_and_as_summaries_without_payloads(backend):
    await _dead_letters(backend, 5)
    async with served(create_app(backend)) as http:
        seen, cursor, pages = [], None, 0
        while True:
            query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = (await http.get("/dead", params=query)).json()
            seen += [letter["id"] for letter in page["dead"]]
            pages += 1
            cursor = page["next"]
            if cursor is None:
                break
        assert (sorted(seen), pages) == ([f"d{n}" for n in range(5)], 3)
        assert len(seen) == len(set(seen))
        summary = (await http.get("/dead", params={"summary": "true"})).json()
        assert summary["next"] is None
        [first, *_] = summary["dead"]
        assert set(first) == {
            "id",
            "state",
            "attempts",
            "reason",
            "last_error",
            "updated_at",
            "task",
        }
        assert "payload" not in first
        assert first["last_error"] == {
            "type": "RuntimeError",
            "message": "broken on purpose",
            "attempt": 1,
        }
        for query in ({"limit": "0"}, {"limit": "1001"}, {"limit": "x"}, {"cursor": "-1"},
                      {"cursor": "\u00b2"}, {"summary": "maybe"}):  # fmt: skip
            refused = await http.get("/dead", params=query)
            assert (refused.status_code, refused.json()["error"]) == (400, "bad_page"), query


async def test_metrics_are_the_workers_names_in_the_prometheus_format(backend):
    async with served(create_app(backend, name="mail")) as http:
        await http.post("/jobs", json={"payload": 1})
        text = (await http.get("/metrics")).text
        assert 'trioqueue_queue_enqueued{queue="mail"} 1.0' in text
        assert "trioqueue_worker_processed_total" in text
        assert "trioqueue_worker_end_to_end_seconds_bucket" in text


def test_an_empty_admin_token_is_refused():
    with pytest.raises(trioqueue.ConfigurationError, match="admin_token"):
        create_app(trioqueue.MemoryBackend(1), admin_token=" ")


async def test_any_unicode_round_trips_and_a_lone_surrogate_is_400(backend):
    async with served(create_app(backend)) as http:
        # a character outside the BMP in the id (%-encoded in Location)
        body = b'{"id": "WE\\u00ae\\udaca\\ude7f]", "payload": ["\\u00e9"]}'
        made = await http.post("/jobs", content=body, headers=JSON)
        assert made.status_code == 201
        assert (await http.get(made.headers["location"])).json()["payload"] == ["\u00e9"]
        # half of a character: JSON allows it, UTF-8 cannot store it
        for lone in (b'{"id": "a\\ud800", "payload": 1}', b'{"payload": ["\\ud800"]}'):
            refused = await http.post("/jobs", content=lone, headers=JSON)
            assert refused.status_code == 400
            assert "lone surrogate" in refused.json()["message"]


async def test_once_stopping_every_new_request_is_503_and_closes_its_connection():
    backend = trioqueue.MemoryBackend(10)
    app = create_app(backend)
    async with served(app) as http:
        assert (await http.get("/healthz")).status_code == 200  # a kept-alive connection
        app.stop_accepting()  # type: ignore[attr-defined]  # what `trioqueue serve` calls
        refused = await http.post("/jobs", json={"id": "late", "payload": 1})
        assert refused.status_code == 503
        assert refused.json()["error"] == "stopping"
        assert (refused.headers["connection"], refused.headers["retry-after"]) == ("close", "1")
    assert await backend.status("late") is None
