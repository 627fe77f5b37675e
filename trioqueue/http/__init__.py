"""trioqueue's HTTP service: seed 003's ingest door, as an ASGI app on Trio.

Needs the ``http`` extra (``pip install 'trioqueue[http]'`` in the checkout:
``pip install '.[http]'``). `create_app` makes the app for a backend;
``trioqueue serve`` runs it with Hypercorn's Trio worker.
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401 - checked here: the extra's one import
except ImportError as exc:  # pragma: no cover - without the extra
    raise ImportError(
        "trioqueue.http needs the http extra: pip install '.[http]' in the trioqueue checkout"
    ) from exc

from .._util import public_dir as _public_dir
from ._app import DEFAULT_MAX_BODY as DEFAULT_MAX_BODY
from ._app import create_app as create_app

__all__ = ["DEFAULT_MAX_BODY", "create_app"]


def __dir__() -> list[str]:
    """The public names: see `trioqueue._util.public_dir`."""
    return _public_dir(__all__, globals())
