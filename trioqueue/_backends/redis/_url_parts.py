"""What a checked Redis URL holds: address, database, credentials, TLS options."""

from __future__ import annotations

import ssl
import urllib.parse

import attrs

from ._url import seed_nodes

__all__ = ["UrlParts", "tls_context", "url_parts"]


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
