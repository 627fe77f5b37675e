"""Stands in for `RedisBackend` when the ``redis`` extra (coredis) is not installed."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["make_stub"]


def make_stub(reason: str) -> type:
    """A class whose constructor raises ImportError naming the extra to install."""

    class RedisBackend:
        """Jobs in Redis; needs ``pip install 'trioqueue[redis]'``."""

        def __init__(self, *args: Any, **kwargs: Any) -> NoReturn:
            raise ImportError(
                f"trioqueue.RedisBackend needs the redis extra: pip install 'trioqueue[redis]' "
                "(in a checkout: pip install '.[redis]') "
                f"({reason})"
            )

    return RedisBackend
