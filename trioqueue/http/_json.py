r"""The service's JSON responses: ASCII-escaped, so that no stored text can fail to encode.

A payload may hold text that is not valid UTF-8 on its own (a lone surrogate, from
``"\ud800"`` in some client's JSON); escaped, it goes out as it came in, where
UTF-8 encoding would fail the response.
"""

from __future__ import annotations

import json
from typing import Any

from starlette import responses

__all__ = ["JSONResponse"]


class JSONResponse(responses.JSONResponse):
    """Starlette's JSON response, with every non-ASCII character escaped."""

    def render(self, content: Any) -> bytes:
        """*content* as compact, ASCII-escaped JSON."""
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")
