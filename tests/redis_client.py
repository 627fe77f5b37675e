"""Which Redis client the backend runs on in this test run, and where the two differ.

``TRIOQUEUE_REDIS_CLIENT=glide`` (``nox -s tests_glide``) runs the Redis tests on
valkey-glide instead of coredis. A test of something glide cannot do yet is
marked with `client_gap`: expected to fail on glide (strictly: it must fail
there, so a gap that closes is noticed), run as usual on coredis.
"""

from __future__ import annotations

import os

import pytest

from trioqueue._backends._redis_client import CLIENT_ENV

ON_GLIDE = os.environ.get(CLIENT_ENV, "").strip().lower() == "glide"


def client_gap(reason: str) -> pytest.MarkDecorator:
    """Expect the test to fail on valkey-glide, for *reason*."""
    return pytest.mark.xfail(ON_GLIDE, reason=f"valkey-glide: {reason}", strict=True)
