"""Redis URLs: which are accepted, how they are shown, and what a failure to connect means.

A URL's password never reaches a message, a log line or a repr: `redacted` hides
it in every form a URL can carry it (``redis://:pw@host``,
``redis://user:pw@host``, ``redis://host/0?password=pw``, percent-encoded or
raw), and `scrubbed` hides it in any text a client error might echo. A URL that
is not valid is described without being echoed, since no redaction can know
where the password of a URL that does not parse ends.
"""

from __future__ import annotations

import re
import ssl
import urllib.parse
from typing import Final

from ..._exceptions import BackendRefused, ConfigurationError

__all__ = [
    "CLUSTER_EXAMPLE",
    "EXAMPLE",
    "SCHEMES",
    "CredentialsRefused",
    "check_url",
    "failure_detail",
    "redacted",
    "scrubbed",
    "seed_nodes",
    "url_problem",
    "wants_cluster",
]

SCHEMES: Final = ("redis", "rediss", "unix")
"""The URL schemes a `RedisBackend` accepts: TCP, TCP over TLS, a Unix socket."""

EXAMPLE: Final = "redis://localhost:6379/0"
"""A valid URL, shown by the messages about invalid ones."""

CLUSTER_EXAMPLE: Final = "redis://node-1:7000,node-2:7000?cluster=yes"
"""A Redis Cluster URL, shown by the messages about a cluster URL that is not valid."""
_YES: Final = ("yes", "true", "1")
_NO: Final = ("no", "false", "0")
_HIDDEN: Final = "***"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# a query-string password runs to the next `&name=` (so a raw `&`, `#`, `?` or `@` in it
# stays hidden) or to the end
_QUERY_PASSWORD = re.compile(
    r"(?P<key>[?&;]password=)(?P<value>.*?)(?=&[A-Za-z_][A-Za-z0-9_]*=|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_SPECIAL: Final = "# as %23, ? as %3F, / as %2F, @ as %40, % as %25"


class CredentialsRefused(BackendRefused):
    """Redis refused the URL's user name or password (changed, or never right).

    A `BackendUnavailable`, so a worker pool treats it as an outage: it keeps
    retrying, with backoff, and carries on once the credentials are accepted.
    """

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(
            where,
            f"Redis at {where} refused the credentials: {detail.rstrip('.')}; check the "
            "password and the ACL user in the URL. Worker pools retry by themselves until "
            "they are accepted",
        )


def _split(url: str) -> tuple[str, list[str]]:
    """*url* without its secrets, and the secrets as written (raw and decoded)."""
    secrets: list[str] = []

    def hide(match: re.Match[str]) -> str:
        value = match["value"]
        secrets.extend([value, urllib.parse.unquote_plus(value)])
        return match["key"] + _HIDDEN

    text = _QUERY_PASSWORD.sub(hide, url)
    scheme = _SCHEME.match(text)
    start = scheme.end() if scheme else 0
    # the user information ends at the last `@`: a raw `@`, `/`, `?` or `#` in the
    # password stays on its side, however urllib would split the URL
    at = text.rfind("@", start)
    if at > start:
        user, colon, password = text[start:at].partition(":")
        if not colon:  # a lone name may be a password written without its colon
            user, password = "", user
        secrets.extend([password, urllib.parse.unquote(password)])
        shown = f"{user}:{_HIDDEN}" if colon else _HIDDEN
        text = text[:start] + shown + text[at:]
    return text, [s for s in secrets if s]


def redacted(url: str) -> str:
    """*url* without its password, in whatever form it holds one: ``redis://user:***@host``.

    Everything between ``//`` and the last ``@`` is user information: its user
    name stays, the rest becomes ``***`` (all of it when there is no colon, as a
    lone name may be a password). A ``password=`` query value becomes ``***``
    too, up to the next ``&name=``. So a raw ``@``, ``/``, ``?`` or ``#`` in a
    password never splits it; a URL with an ``@`` in another query value loses
    more than its password, never less.
    """
    return _split(url)[0]


def scrubbed(text: str, url: str) -> str:
    """*text* (a client's error message) with *url* redacted and its password hidden."""
    shown, secrets = _split(url)
    text = text.replace(url, shown)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _HIDDEN)
    return text


def url_problem(url: object) -> str | None:
    """What is wrong with *url* as a Redis URL (never echoing it), or None if nothing is."""
    if not isinstance(url, str):
        return f"it is not a str but {type(url).__name__!r}: give a URL, e.g. {EXAMPLE}"
    scheme = _SCHEME.match(url)
    if scheme is None:
        return (
            "it has no scheme: start it with redis://, rediss:// (TLS) or unix:// "
            f"(a socket), e.g. {EXAMPLE}"
        )
    name = scheme.group()[:-3]
    if name.lower() not in SCHEMES:
        return f"{name}:// is not a Redis scheme: use redis://, rediss:// (TLS) or unix://"
    encode = f"percent-encode special characters in the user name and password ({_SPECIAL})"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # its message may quote the URL: not shown
        return f"it cannot be parsed (check the brackets of an IPv6 address, and {encode})"
    if _misplaced_at(parts, unix=name.lower() == "unix"):
        return f"its user name or password holds a raw /, ? or #, which ends the host: {encode}"
    cluster = _options(parts).get("cluster")
    if cluster is not None and cluster.lower() not in (*_YES, *_NO):
        return f"its ?cluster= is neither yes nor no: for a Redis Cluster, e.g. {CLUSTER_EXAMPLE}"
    if name.lower() == "unix":
        if not parts.path.strip("/"):
            return "it names no socket: give its path, e.g. unix:///run/redis.sock?db=0"
        if cluster is not None and cluster.lower() in _YES:
            return f"a Redis Cluster is reached over TCP, e.g. {CLUSTER_EXAMPLE}"
        return None
    hosts = parts.netloc.rpartition("@")[2].split(",")
    if len(hosts) > 1 and (cluster is None or cluster.lower() not in _YES):
        return (
            "it names several nodes, which only a Redis Cluster has: add ?cluster=yes, "
            f"e.g. {CLUSTER_EXAMPLE}, or name one server"
        )
    for host in hosts:
        node = urllib.parse.urlsplit(f"redis://{host}")
        try:
            node.port  # noqa: B018 - parsing it is the check
        except ValueError:  # its message quotes the port, which may be a password
            return f"its port is not a number from 1 to 65535, e.g. {EXAMPLE}"
        if not node.hostname:
            return f"it names no host: use redis://host:port/db, e.g. {EXAMPLE}"
    database = parts.path.strip("/")
    if database and not database.isdigit():
        return f"its database is not a number: use redis://host:port/db, e.g. {EXAMPLE}"
    if cluster is not None and cluster.lower() in _YES and database not in ("", "0"):
        return f"a Redis Cluster has database 0 only: leave out the /db, e.g. {CLUSTER_EXAMPLE}"
    return None


def _options(parts: urllib.parse.SplitResult) -> dict[str, str]:
    return {name.lower(): value for name, value in urllib.parse.parse_qsl(parts.query)}


def seed_nodes(url: str) -> tuple[str, list[tuple[str, int]]]:
    """A (checked) TCP URL with its first node only, and every node it names, as (host, port).

    A cluster URL may name several nodes, ``redis://a:7000,b:7000?cluster=yes``, so
    that a client finds the cluster while any one of them is up; the rest of the
    URL (credentials, options) holds for each.
    """
    parts = urllib.parse.urlsplit(url)
    user, at, hosts = parts.netloc.rpartition("@")
    nodes = []
    for host in hosts.split(","):
        node = urllib.parse.urlsplit(f"redis://{host}")
        nodes.append((node.hostname or "localhost", node.port or 6379))
    first = urllib.parse.urlunsplit(parts._replace(netloc=user + at + hosts.split(",")[0]))
    return first, nodes


def wants_cluster(url: str) -> bool:
    """Whether a (checked) URL says ``?cluster=yes``: the server is a Redis Cluster.

    Said, not detected: a backend does not reach Redis until its first call, and
    Redis may be down when a worker starts. A single-server client that meets a
    cluster node gets MOVED, which the connection reports with this option as the fix.
    """
    return _options(urllib.parse.urlsplit(url)).get("cluster", "").lower() in _YES


def _misplaced_at(parts: urllib.parse.SplitResult, *, unix: bool) -> bool:
    """Whether an ``@`` fell outside the host part: a raw ``/``, ``?`` or ``#`` before it."""
    if "@" in parts.fragment or (not unix and "@" in parts.path):
        return True
    for pair in parts.query.split("&"):
        name, equals, _ = pair.partition("=")
        if "@" in (name if equals else pair):
            return True
    return False


def check_url(url: object) -> None:
    """Check *url* the way the command line does.

    Raises:
        ConfigurationError: *url* is not a Redis URL; the message says why and
            shows an accepted one, without echoing *url*.
    """
    problem = url_problem(url)
    if problem is not None:
        raise ConfigurationError(f"RedisBackend(url=...) is not a Redis URL: {problem}")


def failure_detail(error: BaseException, url: str) -> str:
    """What a connection error means, for `BackendUnavailable`, without the password.

    A certificate that failed verification says so (the client's own message
    says only that no connection was established), with what to do about it.
    """
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or cause.reason or str(cause)
            return scrubbed(
                f"certificate verify failed: {reason}; connect by a name the server's "
                "certificate holds, and trust its CA with ?ssl_ca_certs=PATH in the URL",
                url,
            )
        if isinstance(cause, ssl.SSLError):
            return scrubbed(f"the TLS handshake failed: {cause.reason or cause}", url)
        cause = cause.__cause__ or cause.__context__
    return scrubbed(str(error) or type(error).__name__, url)
