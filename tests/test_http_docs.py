"""Every HTTP answer a page shows is what the app answers (issue 36).

A console block on a page that runs ``curl`` against ``trioqueue serve`` and
shows the answer on the next line is replayed here against `create_app` on a
fresh `MemoryBackend`, in the block's order; the answer shown must equal the
app's, as JSON.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import httpx
import pytest

import trioqueue
from trioqueue.http import create_app

DOCS = Path(__file__).parent.parent / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts)
BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)


def exchanges(page: Path) -> list[tuple[str, str, str | None, str | None, str]]:
    """Each (method, path, body, its type, answer shown) of the page's curl lines, in order."""
    found = []
    for block in BLOCK.findall(page.read_text()):
        lines = block.splitlines()
        for command, answer in zip(lines, [*lines[1:], ""], strict=True):
            if not command.startswith("$ curl "):
                continue
            words = shlex.split(command.removeprefix("$ "))
            # as curl sends them: -d as a form, --json as JSON (and a POST by itself)
            body, kind = None, None
            if "-d" in words:
                body, kind = words[words.index("-d") + 1], "application/x-www-form-urlencoded"
            if "--json" in words:
                body, kind = words[words.index("--json") + 1], "application/json"
            method = words[words.index("-X") + 1] if "-X" in words else "POST" if body else "GET"
            url = next(word for word in words[1:] if "localhost:" in word)
            path = "/" + url.split("/", 1)[1] if "/" in url else "/"
            found.append((method, path, body, kind, answer))
    return found


SHOWN = [(page, *exchange) for page in PAGES for exchange in exchanges(page)]


def test_the_pages_show_curl_exchanges_to_check():
    assert SHOWN, "no page shows a curl exchange: the test below checks nothing"


@pytest.mark.parametrize(("page", "method", "path", "body", "kind", "answer"), SHOWN)
async def test_a_shown_answer_is_the_apps(page, method, path, body, kind, answer):
    transport = httpx.ASGITransport(app=create_app(trioqueue.MemoryBackend(10)))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost:8000") as http:
        headers = {"Content-Type": kind} if kind else {}
        got = await http.request(method, path, content=body, headers=headers)
    assert json.loads(answer) == got.json(), f"{page.relative_to(DOCS)}: {method} {path}"
