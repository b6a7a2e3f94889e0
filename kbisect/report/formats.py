"""One interface for every report, as hyperfine's exporters: a kind's `Renderer` maps each
format it has (markdown, text, mbox, json, csv, html) to a function from the kind's subject
to the text printed; adding a format is one function and its entry. The tables live above
every kind (kbisect/commands/: report.py, diff.py, history.py, export.py): imports point down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kbisect.report import mbox

S = TypeVar("S")


Renderer = Mapping[str, Callable[[S], str]]  # a kind's report: each format's function


@dataclass(frozen=True)
class Stored:
    """A stored run as `kbisect report` hands it to its kind's renderer: the directory, its
    summary.json (checked), a --min-effect and a mail's addresses."""

    dir: Path
    summary: Mapping[str, Any]
    min_effect: float | None = None
    sender: str | None = None
    to: Sequence[str] = ()
    cc: Sequence[str] = ()

    def message(self, mail: mbox.Mail) -> str:
        """The mail as an mbox of one message, to this run's addresses."""
        return mbox.message(mail, sender=self.sender, to=self.to, cc=self.cc)


def cell(text: object) -> str:
    """A Markdown table cell's text: `|` escaped, on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def section(title: str, lines: Iterable[str]) -> list[str]:
    """A Markdown section: `## title`, a blank line, its lines, a blank line."""
    return [f"## {title}", "", *lines, ""]


def reproduce(command: str) -> list[str]:
    """A Markdown report's command to run it again."""
    return ["Reproduce:", "", "```sh", command, "```", ""]
