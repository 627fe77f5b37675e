"""The layering rule: a module imports only from its own or lower tiers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trioqueue

TIERS = {
    "_exceptions": 0,
    "_util": 0,
    "_io_deadline": 0,
    "_pool._heartbeat": 0,
    "_payload": 1,
    "_records": 1,
    "_retry": 1,
    "_rate": 1,
    "_metrics": 1,
    "_outcome": 1,
    "_schedule": 1,
    "_cron_file": 2,
    "_current": 2,
    "_backend": 2,
    "_backend_values": 2,
    "_backend_inline": 2,
    "_backends": 3,
    "_backends.memory": 3,
    "_backends.memory._backend": 3,
    "_backends.memory._base": 3,
    "_backends.memory._adding": 3,
    "_backends.memory._claiming": 3,
    "_backends.memory._settling": 3,
    "_backends.memory._inspecting": 3,
    "_backends.memory._entry": 2,
    "_backends.redis": 3,
    "_backends.redis._keys": 1,
    "_backends.redis._url": 1,
    "_backends.redis._stream": 1,
    "_backends.redis._batching": 0,
    "_backends.redis._queue_info": 0,
    "_backends.redis._queue_settings": 1,
    "_backends.redis._scripts": 3,
    "_backends.redis._backend": 3,
    "_backends.redis._base": 3,
    "_backends.redis._adding": 3,
    "_backends.redis._claiming": 3,
    "_backends.redis._settling": 3,
    "_backends.redis._inspecting": 3,
    "_backends.redis._maintaining": 3,
    "_backends.redis._sharded": 3,
    "_backends.redis._shards": 3,
    "_backends.redis._sharded_views": 3,
    "_backends.redis._sharded_work": 3,
    "_backends.redis._connection": 3,
    "_backends.redis._hiredis": 3,
    "_backends.redis._current": 3,
    "_backends.redis._resp": 1,
    "_backends.redis._resp_pool": 1,
    "_backends.redis._resp_cluster": 1,
    "_backends.redis._url_parts": 1,
    "_backends._waiters": 0,
    "_backends.memory._levels": 1,
    "_backends.memory._due": 1,
    "_backends.memory._rate_gate": 2,
    "_backends.redis._events": 0,
    "_queue": 4,
    "_queue_reads": 4,
    "_queue_controls": 4,
    "_job_input": 2,
    "_job_checks": 1,
    "_task": 2,
    "_result_errors": 2,
    "_scheduler": 4,
    "_pool._maintenance": 4,
    "_pool._outage": 4,
    "_pool": 4,
    "_pool._worker_pool": 4,
    "_pool._lifecycle": 4,
    "_pool._handlers": 4,
    "_pool._books": 4,
    "_pool._outcomes": 4,
    "_pool._fetch": 4,
    "_pool._inline": 4,
    "_pool._config": 1,
    "_cli": 5,
    "_cli._main": 5,
    "_cli._parser": 5,
    "_cli._commands_run": 5,
    "_cli._commands_admin": 5,
    "_cli._types": 4,
    "_cli._table": 4,
    "_cli._loading": 4,
    "_cli._redis_args": 4,
    "_cli._demo": 5,
    "_cli._worker": 5,
    "_cli._enqueue": 5,
    "_cli._admin": 5,
    "_cli._queue": 5,
    "_cli._jobs": 5,
    "_cli._serve": 5,
    "http": 4,
    "otel": 4,
    "http._app": 4,
    "http._access": 4,
    "http._hosts": 4,
    "http._jobs": 4,
    "http._limits": 4,
    "http._openapi": 2,
    "http._openapi_parts": 1,
    "http._json": 1,
    "http._batch": 4,
    "http._dead": 4,
    "http._browse": 4,
    "http._dead_page": 1,
    "http._metrics": 4,
    "_record_json": 2,
    "_prometheus": 4,
    "__main__": 5,
    "__init__": 5,
}

PACKAGE = Path(trioqueue.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    found = set()
    package_parts = list(path.relative_to(PACKAGE).parent.parts)  # the importing package
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package_parts[: len(package_parts) - (node.level - 1)]
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(target)
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_tier():
    assert {module_name(p) for p in SOURCES} <= set(TIERS)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_imports_point_down(path):
    name = module_name(path)
    for target in imported_modules(path):
        assert TIERS[target] <= TIERS[name], f"{name} (tier {TIERS[name]}) imports {target}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "_pool").glob("*.py")), ids=lambda p: p.stem)
def test_the_pool_knows_no_concrete_backend(path):
    assert not any(t.startswith("_backends") for t in imported_modules(path))
