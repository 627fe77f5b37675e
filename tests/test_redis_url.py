"""Redis URLs: checked at construction, never shown with their password, and working.

Passwords with characters a URL reserves work percent-encoded, against a private
server started with ``requirepass``; refused credentials are an outage; a
``rediss://`` URL checks the certificate's host name, against a private server
speaking TLS with a certificate made for the test.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

import trioqueue
from trioqueue import BackendUnavailable, ConfigurationError
from trioqueue._backends.redis._url import (
    CredentialsRefused,
    failure_detail,
    redacted,
    scrubbed,
    url_problem,
)
from trioqueue._backends.redis._url_parts import tls_context, url_parts

from .redis_server import RedisServer, find_server_binary, free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

PASSWORD = "p@ss#1?"
"""The private server's password: every character a URL reserves, so it must be encoded."""

ENCODED = urllib.parse.quote(PASSWORD, safe="")
# a password whose pieces, between the reserved characters, are found by no other text
SECRET = "Zq@Xy#7?Kw"
PIECES = ("Zq", "Xy", "Kw")


def queue_name() -> str:
    return "{url-" + uuid.uuid4().hex[:10] + "}"


def redis_command(port: int, *args: str, password: str | None = None) -> bytes:
    """Send one command (after AUTH with *password*) to the server on *port*; its raw reply."""

    def encoded(*parts: str) -> bytes:
        items = [part.encode() for part in parts]
        return b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(i), i) for i in items)

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        if password is not None:
            sock.sendall(encoded("AUTH", password))
            assert sock.recv(1024) == b"+OK\r\n"
        sock.sendall(encoded(*args))
        return sock.recv(65536)


def start_password_server(password: str = PASSWORD) -> RedisServer:
    """A private server that asks for *password* (set once it answers PING)."""
    server = RedisServer(find_server_binary())
    server.start()
    assert redis_command(server.port, "CONFIG", "SET", "requirepass", password) == b"+OK\r\n"
    return server


@pytest.fixture(scope="module")
def password_server() -> Iterator[RedisServer]:
    server = start_password_server()
    yield server
    server.close()


# --- what a URL shows ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:Zq@Xy#7?Kw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("redis://alice:Zq@Xy#7?Kw@h/0", "redis://alice:***@h/0"),
        ("redis://:Zq%40Xy%237%3FKw@h:6379/0", "redis://:***@h:6379/0"),
        ("redis://alice:Zq%40Xy%237%3FKw@h/0", "redis://alice:***@h/0"),
        ("redis://h:6379/0?password=Zq%40Xy%237%3FKw", "redis://h:6379/0?password=***"),
        ("redis://h:6379/0?password=Zq@Xy#7?Kw", "redis://h:6379/0?password=***"),
        ("redis://h/0?db=1&password=ZqXyKw&client_name=w",
         "redis://h/0?db=1&password=***&client_name=w"),
        ("redis://h/0?PASSWORD=ZqXyKw", "redis://h/0?PASSWORD=***"),
        ("redis://ZqXyKw@h/0", "redis://***@h/0"),  # a lone name may be a password
        ("rediss://alice:ZqXyKw@h:6380/0?ssl_ca_certs=/ca.pem",
         "rediss://alice:***@h:6380/0?ssl_ca_certs=/ca.pem"),
        ("unix://:ZqXyKw@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
        ("alice:ZqXyKw@h:6379", "alice:***@h:6379"),  # no scheme: still hidden
        ("redis://h:6379/0", "redis://h:6379/0"),
    ],
)  # fmt: skip
def test_redacted_hides_the_password_in_every_form(url, shown):
    assert redacted(url) == shown
    for piece in PIECES:
        assert piece not in redacted(url)


def test_scrubbed_hides_the_url_and_the_password_wherever_a_message_echoes_them():
    url = f"redis://alice:{urllib.parse.quote(SECRET, safe='')}@h:6379/0"
    message = f"cannot connect to {url}: AUTH {SECRET} failed ({urllib.parse.quote(SECRET)})"
    text = scrubbed(message, url)
    assert "redis://alice:***@h:6379/0" in text
    for piece in PIECES:
        assert piece not in text


def test_a_backend_repr_shows_no_password():
    for url in (
        f"redis://alice:{urllib.parse.quote(SECRET, safe='')}@h:6379/0",
        f"redis://h:6379/0?password={urllib.parse.quote(SECRET, safe='')}",
    ):
        backend = trioqueue.RedisBackend(url, queue="{q}", min_idle=30)
        for piece in PIECES:
            assert piece not in repr(backend)
        assert "***" in repr(backend)


# --- which URLs are accepted ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:6395", "it has no scheme: start it with redis://, rediss:// (TLS) or unix://"),
        ("http://localhost:6379", "http:// is not a Redis scheme"),
        ("redis://:Zq@Xy#7?Kw@127.0.0.1:6379/0", "percent-encode special characters"),
        ("redis://:Zq/Kw@127.0.0.1:6379/0", "percent-encode special characters"),
        ("redis://:ZqXyKw", "its port is not a number"),  # a password without its host
        ("redis://h:99999/0", "its port is not a number"),
        ("redis:///0", "it names no host"),
        ("redis://h/zero", "its database is not a number"),
        ("redis://[::1:6379/0", "cannot be parsed"),
        ("unix://", "it names no socket"),
        (6379, "it is not a str but 'int'"),
        ("redis://h:7000?cluster=maybe", "its ?cluster= is neither yes nor no"),
        ("unix:///run/redis.sock?cluster=yes", "a Redis Cluster is reached over TCP"),
        ("redis://h:7000/3?cluster=yes", "a Redis Cluster has database 0 only"),
        ("redis://a:7000,b:7001", "it names several nodes, which only a Redis Cluster has"),
        ("redis://a:7000,b:70x1?cluster=yes", "its port is not a number"),
        ("redis://a:7000,?cluster=yes", "it names no host"),
    ],
)
def test_a_backend_with_a_bad_url_is_refused_at_construction(url, says):
    with pytest.raises(ConfigurationError) as raised:
        trioqueue.RedisBackend(url, queue="{q}", min_idle=30)
    message = str(raised.value)
    assert says in message
    assert "e.g." in message or "%23" in message or "unix://" in message  # the fix
    for piece in PIECES:
        assert piece not in message


def test_a_url_without_a_scheme_names_the_accepted_ones_with_an_example():
    with pytest.raises(ConfigurationError) as raised:
        trioqueue.RedisBackend("localhost:6395", queue="{q}", min_idle=30)
    for scheme in ("redis://", "rediss://", "unix://"):
        assert scheme in str(raised.value)
    assert "e.g. redis://localhost:6379/0" in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost",
        "redis://localhost:6379/0",
        "REDIS://localhost:6379/0",
        "rediss://h:6380/1?ssl_ca_certs=/ca.pem",
        "unix:///run/redis.sock?db=2",
        f"redis://:{ENCODED}@h/0",
        "redis://:p@ss@h/0",  # a raw `@` splits nowhere else
        "redis://h/0?password=p@ss",
        "redis://h/0?client_name=me@host",
        "redis://[::1]:6379/0",
        "redis://h:7000?cluster=yes",
        "redis://u:p%40ss@a:7000,b:7001,[::1]:7002?cluster=yes",
        "rediss://h:7000/0?cluster=true&ssl_ca_certs=/ca.pem",
        "redis://h:6379/2?cluster=no",
    ],
)
def test_valid_urls_are_accepted(url):
    assert url_problem(url) is None
    trioqueue.RedisBackend(url, queue="{q}", min_idle=30)


# --- TLS: the certificate's host name is checked -----------------------------------------


@pytest.mark.parametrize(
    ("url", "checks_host", "verifies"),
    [
        ("rediss://h:6380/0", True, ssl.CERT_REQUIRED),
        ("rediss://h/0?ssl_check_hostname=false", False, ssl.CERT_REQUIRED),
        ("rediss://h/0?ssl_check_hostname=0", False, ssl.CERT_REQUIRED),
        ("rediss://h/0?ssl_cert_reqs=none", False, ssl.CERT_NONE),
    ],
)  # fmt: skip
def test_a_tls_url_checks_the_certificate_and_host_name_unless_it_says_not_to(
    url, checks_host, verifies
):
    context = tls_context(url_parts(url))
    assert context.check_hostname is checks_host
    assert context.verify_mode == verifies


def test_a_certificate_failure_says_so_and_how_to_fix_it():
    url = f"rediss://:{ENCODED}@h:6380/0"
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cause.verify_message = "Hostname mismatch, certificate is not valid for 'h'."
    try:
        try:
            raise cause
        except ssl.SSLError as exc:
            raise ConnectionError("Unable to establish a connection to h:6380") from exc
    except ConnectionError as exc:
        detail = failure_detail(exc, url)
    assert detail.startswith("certificate verify failed: Hostname mismatch")
    assert "ssl_ca_certs" in detail
    assert "Unable to establish" not in detail


# --- against a server with a password ------------------------------------------------


@pytest.mark.parametrize(
    "form",
    [
        "redis://:{encoded}@127.0.0.1:{port}/0",
        "redis://default:{encoded}@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password={encoded}",
    ],
)
async def test_a_percent_encoded_password_is_the_password(password_server, form):
    url = form.format(encoded=ENCODED, port=password_server.port)
    async with trioqueue.RedisBackend(url, queue=queue_name(), min_idle=30) as backend:
        await trioqueue.Queue(backend).enqueue({"n": 1}, id="a")
        assert (await backend.stats()).enqueued == 1


@pytest.mark.parametrize(
    "form", ["redis://:Wr0ngPw@127.0.0.1:{port}/0", "redis://127.0.0.1:{port}/0"]
)
async def test_refused_credentials_are_an_outage_that_says_what_to_check(password_server, form):
    url = form.format(port=password_server.port)
    async with trioqueue.RedisBackend(url, queue=queue_name(), min_idle=30) as backend:
        with pytest.raises(BackendUnavailable) as raised:
            await backend.stats()
        assert isinstance(raised.value, CredentialsRefused)
        with pytest.raises(CredentialsRefused):  # the claim's blocking wait too
            await backend.claim(1, lease=30, block=0.1)
    message = str(raised.value)
    assert "refused the credentials" in message
    assert "check the password and the ACL user" in message
    assert "Wr0ngPw" not in message


# --- against a server speaking TLS ---------------------------------------------------


class TlsServer:
    """A private server on a TLS port only, with the certificate it is given."""

    def __init__(self, binary: str, cert: Path, key: Path) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="trioqueue-tls-"))
        args = [
            binary, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
            "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-auth-clients", "no", "--dir", str(self.dir), "--save", "",
            "--appendonly", "no", "--logfile", str(self.dir / "server.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait_until_up(self) -> None:
        deadline = time.monotonic() + 10
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self.dir / "server.log"
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                pytest.skip(
                    "the Redis server binary here does not serve TLS (built without it?): "
                    f"{err}{log.read_text()[-500:] if log.exists() else ''}"
                )
            try:
                with (
                    socket.create_connection(("127.0.0.1", self.port), timeout=1) as raw,
                    context.wrap_socket(raw) as sock,
                ):
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"the TLS server did not answer on port {self.port}")

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stderr:
            self.process.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsServer, Path]]:
    """A TLS server whose certificate names only ``localhost``; and the CA that signed it.

    A CA and a server certificate it signs, as a real deployment has: some TLS
    stacks refuse a self-signed CA as a server's own.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make the test's certificate")
    where = tmp_path_factory.mktemp("tls")
    ca, ca_key = where / "ca.pem", where / "ca-key.pem"
    cert, key, request = where / "cert.pem", where / "key.pem", where / "cert.csr"
    extensions = where / "ext.cnf"
    extensions.write_text("subjectAltName=DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(ca_key),
        "-out", str(ca), "-subj", "/CN=trioqueue test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
        "-subj", "/CN=localhost")  # fmt: skip
    run("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "1", "-out", str(cert),
        "-extfile", str(extensions))  # fmt: skip
    server = TlsServer(find_server_binary(), cert, key)
    try:
        server.wait_until_up()
        yield server, ca
    finally:
        server.close()


async def stats_over(url: str) -> trioqueue.MetricsSnapshot:
    async with trioqueue.RedisBackend(url, queue=queue_name(), min_idle=30) as backend:
        return await backend.stats()


async def test_tls_to_the_name_on_the_certificate_works(tls_server):
    server, cert = tls_server
    # localhost may resolve to ::1 first, where nothing listens: the client tries the next
    await stats_over(f"rediss://localhost:{server.port}/0?ssl_ca_certs={cert}")


async def test_tls_to_a_name_not_on_the_certificate_fails_verification(tls_server):
    server, cert = tls_server
    with pytest.raises(BackendUnavailable) as raised:
        await stats_over(f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={cert}")
    message = str(raised.value)
    assert "certificate verify failed: IP address mismatch" in message
    assert "Unable to establish a connection" not in message


async def test_the_host_name_check_can_be_turned_off_in_the_url(tls_server):
    server, cert = tls_server
    await stats_over(
        f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={cert}&ssl_check_hostname=false"
    )


async def test_tls_to_an_untrusted_certificate_fails_verification(tls_server):
    server, _ = tls_server
    with pytest.raises(BackendUnavailable) as raised:
        await stats_over(f"rediss://:{ENCODED}@localhost:{server.port}/0")
    assert "certificate verify failed: unable to get local issuer certificate" in str(raised.value)
    assert ENCODED not in str(raised.value)


def test_the_command_line_says_certificate_verify_failed_in_one_line(tls_server):
    server, cert = tls_server
    result = subprocess.run(
        [sys.executable, "-m", "trioqueue", "stats", "--queue", "{q}",
         "--redis", f"rediss://:{ENCODED}@127.0.0.1:{server.port}/0?ssl_ca_certs={cert}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "certificate verify failed: IP address mismatch" in result.stderr
    assert "ssl_ca_certs=PATH" in result.stderr  # what to do
    assert len(result.stderr.strip().splitlines()) == 1
    assert ENCODED not in result.stderr
    assert PASSWORD not in result.stderr


def test_url_parts_reads_a_unix_socket_and_a_password_option():
    parts = url_parts("unix:///run/redis.sock?db=4&password=s%26cret")
    assert (parts.socket_path, parts.db, parts.password, parts.username) == (
        "/run/redis.sock",
        4,
        "s&cret",
        None,
    )


async def test_a_database_the_server_does_not_have_is_a_configuration_error_saying_so(
    redis_server,
):
    url = redis_server.url.rsplit("/", 1)[0] + "/99"  # the server has 16
    async with trioqueue.RedisBackend(url, queue=queue_name(), min_idle=30) as backend:
        with pytest.raises(trioqueue.ConfigurationError) as raised:
            await backend.stats()
    assert "has no database 99 (" in str(raised.value)
    assert "use a number below the server's `databases` setting" in str(raised.value)
    command = [sys.executable, "-m", "trioqueue", "stats", "--redis", url, "--queue", "{q}"]
    result = await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False)
    assert result.returncode == 2  # bad input, not "could not be reached" (1)
    assert b"has no database 99" in result.stderr


def test_a_cluster_url_may_name_several_nodes_each_with_the_urls_credentials():
    url = "rediss://app:s3cret@a:7000,b,[::1]:7002?cluster=yes&ssl_ca_certs=/ca.pem"
    parts = url_parts(url)
    assert parts.nodes == (("a", 7000), ("b", 6379), ("::1", 7002))
    assert (parts.host, parts.port, parts.username, parts.password) == ("a", 7000, "app", "s3cret")
    assert parts.options["ssl_ca_certs"] == "/ca.pem"
    assert redacted(url) == "rediss://app:***@a:7000,b,[::1]:7002?cluster=yes&ssl_ca_certs=/ca.pem"
