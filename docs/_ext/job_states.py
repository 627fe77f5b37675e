"""A drawing of a job's life, made from the code's own table of moves.

``.. trioqueue-job-states::`` draws every `JobState` and every move that
``TRANSITIONS`` allows, with Graphviz (Sphinx's ``graphviz`` extension; without
the ``dot`` program the page shows the drawing's source and says so). Each move
is labelled here, by what causes it; the build fails when a label names a move
the table does not allow or a move has no label, so the drawing cannot drift
from the code.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from docutils.parsers.rst import Directive
from sphinx.errors import ExtensionError

from trioqueue._records import TERMINAL_STATES, TRANSITIONS, JobState

if TYPE_CHECKING:
    from sphinx.application import Sphinx

S = JobState

#: What causes each move; "enqueue" moves come from outside any state.
CAUSES: dict[tuple[JobState | None, JobState], str] = {
    (None, S.RECEIVED): "enqueue",
    (None, S.SCHEDULED): "enqueue(delay=…)",
    (None, S.DEFERRED): "enqueue(after=…)",
    (S.DEFERRED, S.RECEIVED): "the jobs it runs\nafter completed",
    (S.DEFERRED, S.FAILED): "one of them\ndid not",
    (S.DEFERRED, S.CANCELLED): "cancel",
    (S.SCHEDULED, S.RECEIVED): "due",
    (S.SCHEDULED, S.CANCELLED): "cancel",
    (S.RECEIVED, S.PROCESSING): "claimed",
    (S.RECEIVED, S.SCHEDULED): "over its\nrate limit",
    (S.RECEIVED, S.CANCELLED): "cancel",
    (S.PROCESSING, S.COMPLETED): "handler returned",
    (S.PROCESSING, S.DROPPED): "raised Drop",
    (S.PROCESSING, S.FAILED_RETRY): "attempt failed,\nattempts left",
    (S.PROCESSING, S.FAILED): "last attempt\nfailed",
    (S.PROCESSING, S.RECEIVED): "released or\nrecovered",
    (S.PROCESSING, S.CANCELLED): "cancel",
    (S.FAILED_RETRY, S.PROCESSING): "backoff over,\nclaimed again",
    (S.FAILED_RETRY, S.CANCELLED): "cancel",
    (S.FAILED, S.RECEIVED): "requeue_dead",
}


def _check() -> None:
    """Fail the build when `CAUSES` and `TRANSITIONS` disagree."""
    allowed = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}
    labelled = {move for move in CAUSES if move[0] is not None}
    if allowed != labelled:
        unlabelled = sorted(f"{a} -> {b}" for a, b in allowed - labelled)
        unknown = sorted(f"{a} -> {b}" for a, b in labelled - allowed)
        raise ExtensionError(
            f"job_states.CAUSES disagrees with TRANSITIONS: moves without a label "
            f"{unlabelled}, labels for moves not allowed {unknown}; update docs/_ext/job_states.py"
        )


def _quoted(text: str) -> str:
    return '"' + text.replace('"', r"\"").replace("\n", r"\n") + '"'


def dot_source() -> str:
    """The Graphviz source of the drawing."""
    _check()
    lines = [
        "digraph job_states {",
        '  rankdir=TB; bgcolor="white"; pad=0.2;',  # white: legible on a dark theme too
        '  node [shape=box, style="rounded", fontname="sans-serif", fontsize=11];',
        '  edge [fontname="sans-serif", fontsize=9];',
        '  start [shape=point, width=0.12, label=""];',
    ]
    for state in JobState:
        shape = "peripheries=2" if state in TERMINAL_STATES else "peripheries=1"
        lines.append(f"  {state.value} [label={_quoted(state.value)}, {shape}];")
    for (source, target), cause in CAUSES.items():
        origin = "start" if source is None else source.value
        lines.append(f"  {origin} -> {target.value} [label={_quoted(cause)}];")
    lines.append("}")
    return "\n".join(lines)


class JobStatesDiagram(Directive):
    """The drawing, as a ``graphviz`` directive."""

    def run(self) -> list[object]:
        """Insert the ``graphviz`` directive with the source (its text, without ``dot``)."""
        body = ["   " + line for line in dot_source().splitlines()]
        alt = "every state of a job and every move between them"
        if shutil.which("dot") is None:  # a build without Graphviz: the source, said so
            note = (
                "(This build had no Graphviz ``dot`` program, so the drawing is shown as "
                "its source; ``apt install graphviz`` draws it.)"
            )
            lines = [note, "", ".. code-block:: text", "", *body]
        else:
            lines = [".. graphviz::", "   :align: center", f"   :alt: {alt}", "", *body]
        self.state_machine.insert_input(lines, "trioqueue-job-states")
        return []


def setup(app: Sphinx) -> dict[str, object]:
    """Register the directive."""
    app.setup_extension("sphinx.ext.graphviz")
    app.add_directive("trioqueue-job-states", JobStatesDiagram)
    return {"parallel_read_safe": True}
