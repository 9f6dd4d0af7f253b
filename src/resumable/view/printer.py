"""Printing view lines: plain for pipes and ``NO_COLOR``, through rich on a colour terminal.

Every segment printed here has its control characters escaped (``core.text``): data from a run (a
task, a note, a unit id) never reaches the terminal raw.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from resumable.core.text import escape_controls
from resumable.view.status import Line, plain


def safe(line: Sequence[tuple[str, str]]) -> Line:
    return [(escape_controls(text), style) for text, style in line]


class Printer:
    def __init__(self, out: IO[str], *, color: bool, width: int | None) -> None:
        self.out = out
        self.color = color
        self.width = width  # None: not a terminal, never truncate
        self._console: Any = None

    @classmethod
    def for_stdout(cls, no_color: bool = False) -> Printer:
        out: IO[str] = sys.stdout
        tty = out.isatty()
        color = tty and not no_color and not os.environ.get("NO_COLOR")
        width = shutil.get_terminal_size((100, 24)).columns if tty else None
        return cls(out, color=color, width=width)

    @property
    def layout_width(self) -> int:
        return self.width or 100

    def texts(self, lines: Sequence[Line]) -> list[Any]:
        from rich.text import Text

        return [Text.assemble(*safe(line), no_wrap=True, overflow="ellipsis") for line in lines]

    def console(self) -> Any:
        if self._console is None:
            # Lazy: rich costs ~60 ms to import, paid only when colour is actually drawn.
            from rich.console import Console

            self._console = Console(file=self.out, force_terminal=True, width=self.width,
                                    highlight=False, markup=False, emoji=False)
        return self._console

    def lines(self, lines: Sequence[Line]) -> None:
        if self.color:
            console = self.console()
            for text in self.texts(lines):
                console.print(text)
            return
        w = self.width
        chunks = []
        for line in lines:
            s = plain(safe(line))
            if w is not None and len(s) > w:
                s = s[: max(1, w - 1)] + "…"
            chunks.append(s)
        self.out.write("\n".join(chunks) + "\n")
        self.out.flush()

    def text(self, s: str) -> None:
        """Print text that is already safe (JSON, which escapes control characters, or our own)."""
        self.out.write(s if s.endswith("\n") else s + "\n")
        self.out.flush()


def dump_json(value: object) -> str:
    # jsonio's encoder (orjson's speed, big=True) escapes the C1 controls orjson writes raw.
    from resumable.core import jsonio

    return jsonio.dumps_pretty(value, big=True).decode()


def show_status(doc: Mapping[str, Any], location: str, *, no_color: bool = False) -> None:
    """Print the default status view of one run (``resumable status`` and ``run --status``)."""
    import time

    from resumable.view.status import render_status

    printer = Printer.for_stdout(no_color)
    printer.lines(render_status(doc, file=location, now=time.time(), width=printer.layout_width,
                                here=os.getcwd()))
