"""Argument types and checks of the command line; each error says what to type instead."""

from __future__ import annotations

import argparse
from typing import Final, Literal

from .._rate import RateLimit, parse_rate

__all__ = [
    "SERVE_MAX_MEMORY_MIB",
    "NotThere",
    "UsageError",
    "bind_address",
    "header",
    "non_negative",
    "non_negative_int",
    "port",
    "positive_int",
    "printable",
    "rate",
    "rate_limit",
    "seconds",
]


SERVE_MAX_MEMORY_MIB: Final = 256
"""MiB of jobs and records ``trioqueue serve`` holds in memory unless ``--max-memory``."""


# C0 and C1 controls, DEL, the line and paragraph separators and the bidirectional
# overrides: each shown as Python writes it in a string, e.g. \x1b, \n, \u202e
_ESCAPES: Final = {
    code: repr(chr(code))[1:-1]
    for code in (
        *range(0x20),
        *range(0x7F, 0xA0),
        0x2028,
        0x2029,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
}


class UsageError(Exception):
    """Bad input on the command line: reported in one line, exit status 2."""


class NotThere(Exception):
    """What the command names (a queue) is not there: reported in one line, exit status 1."""


def printable(text: object) -> str:
    r"""*text* safe to print on a terminal: controls escaped as in Python (``\x1b``, ``\n``).

    C0 and C1 control characters, DEL, the Unicode line separators and the
    bidirectional overrides are escaped, so a job id, reason or error message
    cannot move the cursor, clear the screen or forge a line of output; every
    other character, Unicode included, is printed as it is.
    """
    return str(text).translate(_ESCAPES)


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        fix = (
            "is negative: use 0 or more" if minimum == 0 else f"is too small: use {minimum} or more"
        )
        raise argparse.ArgumentTypeError(f"{value} {fix}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    return _whole_number(text, 1)


def bind_address(text: str) -> str:
    """``HOST:PORT`` (``[IPv6]:PORT`` for an IPv6 address), the port 1 to 65535."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT; e.g. 127.0.0.1:8000, or [::1]:8000 for IPv6"
        )
    bare = host.removeprefix("[").removesuffix("]")
    if ":" in bare and not (host.startswith("[") and host.endswith("]")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: put an IPv6 address in brackets, e.g. [{bare}]:{port}"
        )
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: the port must be a number from 1 to 65535")
    return text


def rate(text: str) -> float:
    """A probability, 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is out of range: use 0 to 1")
    return value


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: use 0 or more")
    if value == float("inf"):
        raise argparse.ArgumentTypeError("inf is not a number of seconds: use a finite one")
    return value


def header(text: str) -> tuple[str, str]:
    """``NAME=VALUE``: one of a job's headers."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE, e.g. tenant=acme")
    return name, value


def seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 is too small: use a number of seconds > 0")
    return value


def rate_limit(text: str) -> RateLimit | Literal["none"]:
    """A rate limit, ``STARTS/PER`` (``10/s``, ``10/s burst 5``), or ``none`` for none."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or 'none' to remove it") from None


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    return _whole_number(text, 0)


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: use 1 to 65535")
    return value
