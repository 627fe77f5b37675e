"""The ``Host`` check: a request names this service, or it is refused (400).

DNS rebinding points a name an attacker owns at the service's address (often
127.0.0.1), after a page from that name has loaded in the operator's browser;
the page's requests then reach the service as same-origin requests carrying
the attacker's name in ``Host``. Refusing names the service does not answer to
stops them. A ``Host`` that is an IP address always passes: rebinding needs a
name.

Starlette's ``TrustedHostMiddleware`` does the matching too, but answers in
plain text without saying what to do; this service answers every error in JSON
with the fix.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from ._jobs import error

if TYPE_CHECKING:
    from collections.abc import Iterable

    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostCheck", "host_name"]


def host_name(header: str) -> str:
    """The name in a ``Host`` header: no port, no IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostCheck:
    """ASGI middleware: HTTP requests whose ``Host`` is an IP address or one of *names*."""

    def __init__(self, app: ASGIApp, names: Iterable[str]) -> None:
        self._app = app
        self._names = frozenset(name.lower().rstrip(".") for name in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            name = host_name(given).rstrip(".")
            if not (_is_address(name) or name in self._names):
                allowed = ", ".join(sorted(self._names)) or "none but IP addresses"
                response = error(
                    400,
                    "bad_host",
                    f"this service does not answer to the name {name!r} (it answers to "
                    f"{allowed}): use one of those, or start it with --allowed-host {name} "
                    "if the name is yours",
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)
