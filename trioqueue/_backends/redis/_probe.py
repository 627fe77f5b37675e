"""What a Redis URL holds, and why a connection to it fails, found with the standard library.

valkey-glide reports a failed TLS handshake as a connect timeout and a password
changed under a running client as timeouts. `probe` connects once as the URL says
(TCP or a Unix socket, TLS with the URL's CA and client certificate) and
authenticates, in a worker thread, so the glide connection can say what is
really wrong, in the same words as the coredis one.
"""

from __future__ import annotations

import socket
import ssl
import urllib.parse
from typing import TYPE_CHECKING, Final

import attrs

from ._url import failure_detail, scrubbed, seed_nodes

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["UrlParts", "probe", "tls_context", "url_parts"]

_PROBE_TIMEOUT: Final = 2.0


@attrs.frozen
class UrlParts:
    """A checked Redis URL, read."""

    scheme: str
    """``redis``, ``rediss`` or ``unix``."""
    host: str
    port: int
    socket_path: str | None
    """The Unix socket's path, for ``unix://``."""
    db: int
    username: str | None
    password: str | None
    options: dict[str, str]
    """The query string's options, names lower-cased."""
    nodes: tuple[tuple[str, int], ...] = ()
    """Every (host, port) the URL names: one, or a cluster's seed nodes (the first
    is *host* and *port*); none for a socket."""

    @property
    def insecure(self) -> bool:
        """Whether the URL turns certificate verification off (``ssl_cert_reqs=none``)."""
        return self.options.get("ssl_cert_reqs", "").lower() == "none"


def url_parts(url: str) -> UrlParts:
    """Read *url* (already checked): address, database, credentials, options.

    A password may be in the user information (percent-encoded) or in
    ``?password=``; a user name alone, without a colon, is a password, as
    redis-py reads it.
    """
    nodes: list[tuple[str, int]] = []
    if not url.lower().startswith("unix:"):
        url, nodes = seed_nodes(url)
    parts = urllib.parse.urlsplit(url)
    options = {k.lower(): v for k, v in urllib.parse.parse_qsl(parts.query)}
    scheme = parts.scheme.lower()
    path = urllib.parse.unquote(parts.path)
    unix = scheme == "unix"
    db = int((path.strip("/") if not unix else "") or options.get("db", "0"))
    password = options.get("password")
    if parts.password is not None:
        password = urllib.parse.unquote(parts.password)
    username = urllib.parse.unquote(parts.username) if parts.username else None
    if username and parts.password is None and password is None:
        username, password = None, username
    return UrlParts(
        scheme=scheme,
        host=parts.hostname or "localhost",
        port=parts.port or 6379,
        socket_path=path if unix else None,
        db=db,
        username=username or None,
        password=password,
        options=options,
        nodes=tuple(nodes),
    )


def tls_context(url: UrlParts) -> ssl.SSLContext:
    """The TLS context a ``rediss://`` URL asks for: its CA, client certificate, checks."""
    context = ssl.create_default_context(cafile=url.options.get("ssl_ca_certs"))
    if url.insecure:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    elif url.options.get("ssl_check_hostname", "").lower() in ("false", "0", "no"):
        context.check_hostname = False
    certfile = url.options.get("ssl_certfile")
    if certfile:
        context.load_cert_chain(certfile, url.options.get("ssl_keyfile"))
    return context


def _bulk(value: str) -> bytes:
    raw = value.encode()
    return b"$%d\r\n%s\r\n" % (len(raw), raw)


def probe(
    url: str, timeout: float = _PROBE_TIMEOUT, *, also: Sequence[tuple[str, int]] = ()
) -> str | None:
    """Why connecting to *url* fails, in coredis's words; None if it does not (blocking).

    Connects, makes the TLS handshake the URL asks for, and sends ``AUTH`` when
    the URL has a password. The text never holds the password. A cluster is
    reached when any of its nodes is: the URL's, then *also* (the nodes the
    cluster named), each tried in turn; the first node's failure is the reason.
    """
    parts = url_parts(url)
    if parts.socket_path is not None:
        return _probe_one(parts, None, url, timeout)
    reasons = []
    for node in dict.fromkeys([*parts.nodes, *also]):
        reason = _probe_one(parts, node, url, timeout)
        if reason is None:
            return None
        reasons.append(reason)
    return reasons[0]


def _probe_one(
    parts: UrlParts, node: tuple[str, int] | None, url: str, timeout: float
) -> str | None:
    """`probe` of one node (None: the socket)."""
    try:
        if node is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(parts.socket_path or "")
        else:
            sock = socket.create_connection(node, timeout=timeout)
        with sock:
            if parts.scheme == "rediss" and node is not None:
                with tls_context(parts).wrap_socket(sock, server_hostname=node[0]) as tls:
                    return _authenticate(tls, parts, url)
            return _authenticate(sock, parts, url)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        return failure_detail(exc, url)


def _authenticate(sock: socket.socket, parts: UrlParts, url: str) -> str | None:
    if parts.password is None:
        return None
    words = ["AUTH", *([parts.username] if parts.username else []), parts.password]
    sock.sendall(b"*%d\r\n" % len(words) + b"".join(_bulk(word) for word in words))
    reply = sock.recv(512).split(b"\r\n", 1)[0]
    if reply.startswith(b"-"):
        return scrubbed(reply[1:].decode(errors="replace"), url)
    return None
