"""valkey-glide's client settings for one queue: URL, timeouts, reconnects, and what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..._exceptions import ConfigurationError
from ._connection import CREDENTIAL_WORDS, IO_TIMEOUT, TRANSIENT_REPLIES, says_any
from ._probe import url_parts
from ._url import wants_cluster

if TYPE_CHECKING:
    from collections.abc import Sequence

import glide

__all__ = [
    "GLIDE_TRANSIENT",
    "Client",
    "cluster_nodes",
    "glide_configuration",
    "new_client",
    "refuse_what_glide_cannot_do",
    "server_said_no",
]


_CONNECT_TIMEOUT_MS: Final = 2_000


# Reconnect attempts at most 400 ms apart (50 ms * 2**3, jittered). glide's own
# backoff grows for as long as the server is away: after a 3 s restart it came
# back 2.3-2.5 s after the server did, longer than the one more lease a sweep
# grants claims after an outage, so other pools recovered live jobs meanwhile.
_RECONNECT: Final = glide.BackoffStrategy(num_of_retries=3, factor=50, exponent_base=2)


# errors that mean "not now" rather than "no": glide raises a plain RequestError
# when it cannot connect, and a restarted server refuses commands while it loads
GLIDE_TRANSIENT: Final = (
    "connect failed",
    "IoError",
    "Connection refused",
    "Broken pipe",
    "Connection reset",
    *TRANSIENT_REPLIES,
)


Client = glide.GlideClient | glide.GlideClusterClient
"""A standalone or a cluster glide client: the connection uses either."""


glide.Logger.set_logger_config(glide.LogLevel.OFF)  # else it writes to standard output


def refuse_what_glide_cannot_do(url: str) -> None:
    """Raise `ConfigurationError` for ``?ssl_check_hostname=false``, with what to do."""
    parts = url_parts(url)
    if parts.options.get("ssl_check_hostname", "").lower() in ("false", "0", "no"):
        raise ConfigurationError(
            "valkey-glide cannot skip the certificate's host-name check alone: connect "
            "by a name the certificate holds, or use the coredis client (pip install "
            "coredis; TRIOQUEUE_REDIS_CLIENT=coredis), or turn verification off with "
            "?ssl_cert_reqs=none"
        )


def glide_configuration(
    url: str, also: Sequence[tuple[str, int]] = ()
) -> glide.GlideClientConfiguration | glide.GlideClusterClientConfiguration:
    """The glide client configuration a (checked) Redis URL means.

    ``redis://[user:password@]host[:port][/db]``, ``rediss://`` (TLS; the
    certificate is verified against ``?ssl_ca_certs=PATH`` or the system's CAs,
    and ``?ssl_cert_reqs=none`` turns verification off), ``unix://path?db=N``;
    ``?password=`` and ``?ssl_certfile=``/``?ssl_keyfile=`` (a client certificate)
    are read too. glide has no switch for the host-name check alone, so
    ``?ssl_check_hostname=false`` is refused with what to do instead.
    ``?cluster=yes``: a Redis Cluster, reached through any of the URL's nodes
    (``redis://a:7000,b:7000?cluster=yes``) or of *also*, the nodes the cluster
    itself named (a cluster client's configuration, database 0).

    Raises:
        ConfigurationError: ``?ssl_check_hostname=false``, or the CA file cannot be read.
    """
    refuse_what_glide_cannot_do(url)
    parts = url_parts(url)
    if parts.socket_path is not None:
        address = glide.NodeAddress(unix_socket_path=parts.socket_path)
    else:
        address = glide.NodeAddress(parts.host, parts.port)
    credentials = (
        glide.ServerCredentials(password=parts.password, username=parts.username)
        if parts.password is not None
        else None
    )
    tls = None
    if parts.scheme == "rediss":
        ca = parts.options.get("ssl_ca_certs")
        try:
            root = Path(ca).read_bytes() if ca and not parts.insecure else None
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read the CA certificates named by ?ssl_ca_certs= ({exc}): "
                "give the path of a PEM file this process can read"
            ) from exc
        tls = glide.TlsAdvancedConfiguration(
            use_insecure_tls=parts.insecure or None,
            root_pem_cacerts=root,
            client_cert_path=parts.options.get("ssl_certfile"),
            client_key_path=parts.options.get("ssl_keyfile"),
        )
    if wants_cluster(url):
        nodes = dict.fromkeys([*parts.nodes, *also])
        return glide.GlideClusterClientConfiguration(
            [glide.NodeAddress(host, port) for host, port in nodes],
            use_tls=parts.scheme == "rediss",
            credentials=credentials,
            request_timeout=int(IO_TIMEOUT * 1000),
            reconnect_strategy=_RECONNECT,
            lazy_connect=True,
            advanced_config=glide.AdvancedGlideClusterClientConfiguration(
                connection_timeout=_CONNECT_TIMEOUT_MS, tls_config=tls
            ),
        )
    return glide.GlideClientConfiguration(
        [address],
        use_tls=parts.scheme == "rediss",
        credentials=credentials,
        database_id=parts.db,
        request_timeout=int(IO_TIMEOUT * 1000),  # glide's default is 250 ms
        reconnect_strategy=_RECONNECT,
        # Redis may be down when a worker starts: it connects on the first request
        lazy_connect=True,
        advanced_config=glide.AdvancedGlideClientConfiguration(
            connection_timeout=_CONNECT_TIMEOUT_MS, tls_config=tls
        ),
    )


def server_said_no(exc: glide.RequestError) -> bool:
    """Whether *exc* is the server refusing a command, not an outage or refused credentials."""
    if isinstance(exc, glide.ConnectionError | glide.TimeoutError):
        return False
    return not says_any(str(exc), (*CREDENTIAL_WORDS, *GLIDE_TRANSIENT))


def cluster_nodes(reply: str) -> list[tuple[str, int]]:
    """The (host, port) of each node a ``CLUSTER NODES`` reply names, but failed ones."""
    nodes = []
    for line in reply.splitlines():
        fields = line.split()
        if len(fields) < 3 or {"fail", "noaddr", "handshake"} & set(fields[2].split(",")):
            continue
        host, _, port = fields[1].partition("@")[0].rpartition(":")
        if host and port.isdigit():
            nodes.append((host.strip("[]"), int(port)))
    return nodes


async def new_client(url: str, also: Sequence[tuple[str, int]] = ()) -> Client:
    """A glide client for *url*: a cluster client when the URL says ``?cluster=yes``."""
    config = glide_configuration(url, also)
    if isinstance(config, glide.GlideClusterClientConfiguration):
        return await glide.GlideClusterClient.create(config)
    return await glide.GlideClient.create(config)
