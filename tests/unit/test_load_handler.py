"""`load_handler` says what failed when the handler's module cannot be imported, and where."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import pytest

from trioqueue._cli._loading import load_handler
from trioqueue._cli._types import UsageError

if TYPE_CHECKING:
    from pathlib import Path

_names = itertools.count()


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # paths in messages are shown relative to here
    return tmp_path


def write_module(where: Path, source: str) -> str:
    name = f"handler_module_{next(_names)}"
    (where / f"{name}.py").write_text(source)
    return name


def refusal(spec: str) -> str:
    with pytest.raises(UsageError) as caught:
        load_handler(spec)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_module_that_is_not_there_gets_the_path_advice(module_dir: Path) -> None:
    message = refusal("no_such_module_anywhere:run")
    assert "cannot find module 'no_such_module_anywhere'" in message
    assert "PYTHONPATH" in message


def test_a_missing_package_of_a_dotted_name_is_the_module_not_found(module_dir: Path) -> None:
    message = refusal("no_such_package_anywhere.jobs:run")
    assert "cannot find module 'no_such_package_anywhere'" in message


def test_a_missing_dependency_names_it_the_file_and_the_line(module_dir: Path) -> None:
    name = write_module(module_dir, '"""doc"""\n\nimport absent_dependency_xyz.sub\n')
    message = refusal(f"{name}:run")
    assert f"importing {name!r} failed at {name}.py, line 3" in message
    assert "it imports 'absent_dependency_xyz'" in message
    assert "install the package that provides 'absent_dependency_xyz'" in message
    assert "PYTHONPATH" not in message  # the module itself was found


def test_an_error_while_importing_names_the_file_and_the_line(module_dir: Path) -> None:
    helper = write_module(module_dir, "def boom():\n    raise KeyError('settings')\n")
    name = write_module(module_dir, f"import {helper}\n\n{helper}.boom()\n")
    message = refusal(f"{name}:run")
    assert f"raised KeyError at {helper}.py, line 2: 'settings'; fix it" in message


def test_a_syntax_error_names_the_file_and_the_line(module_dir: Path) -> None:
    name = write_module(module_dir, "x = 1\nasync def run(job)\n    pass\n")
    message = refusal(f"{name}:run")
    assert f"raised SyntaxError at {name}.py, line 2" in message


def test_a_multi_line_error_is_told_on_one_line(module_dir: Path) -> None:
    name = write_module(module_dir, "raise RuntimeError('first\\nsecond')\n")
    message = refusal(f"{name}:run")
    assert f"raised RuntimeError at {name}.py, line 1: first second; fix it" in message


_TASKS_MODULE = """
import trioqueue

async def run(job): ...
def block(job): ...

listed = [trioqueue.Task("a", run), trioqueue.Task("b", block, run_sync=True)]
one = trioqueue.Task("a", run, max_attempts=2)
table = {"a": run, "b": trioqueue.Task("b", block, run_sync=True)}
misfiled = {"mail": trioqueue.Task("send", run)}
twice = [trioqueue.Task("a", run), trioqueue.Task("a", run)]
mixed = [trioqueue.Task("a", run), run]
plain_in_table = {"a": block}
"""


@pytest.mark.parametrize("name", ["listed", "one", "table"])
def test_tasks_a_list_of_them_or_a_table_holding_them_load(module_dir: Path, name: str) -> None:
    module = write_module(module_dir, _TASKS_MODULE)
    assert load_handler(f"{module}:{name}") is not None


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("misfiled", "the task 'send' is filed under 'mail'"),
        ("twice", "two tasks named 'a'"),
        ("mixed", "a list holds Tasks, not function"),
        ("plain_in_table", "run_sync=True"),
    ],
)
def test_tasks_a_pool_cannot_run_are_refused_by_name(
    module_dir: Path, name: str, words: str
) -> None:
    module = write_module(module_dir, _TASKS_MODULE)
    message = refusal(f"{module}:{name}")
    assert message.startswith(f"{module}:{name} cannot be run: ")
    assert words in message
