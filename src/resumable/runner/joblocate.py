"""Where a table or key of a TOML job file is, and every problem of a job file collected in one pass.

tomllib keeps no positions, so lines are found by scanning the text, once, and only when there is an
error to report: a valid 100,000-step job file never pays for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from resumable.errors import InvalidInputError

MAX_PROBLEMS = 20  # enough to fix a file in one go; more would scroll the first ones away

_HEADER_RE = re.compile(r"^\s*\[\[?\s*(.*?)\s*\]\]?\s*(?:#.*)?$")
_KEY_RE = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")
_PART_RE = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.|$)""")


def _parts(dotted: str) -> list[str]:
    return [m.group(1).strip("\"'") for m in _PART_RE.finditer(dotted)]


class Locator:
    """Lines of tables (``steps.a``) and keys (``steps.a`` + ``run``), indexed on first use."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self._tables: dict[str, int] | None = None
        self._keys: dict[tuple[str, str], int] = {}

    def _index(self) -> dict[str, int]:
        if self._tables is not None:
            return self._tables
        tables: dict[str, int] = {}
        current: list[str] = []
        for n, line in enumerate(self.text.splitlines(), 1):
            head = _HEADER_RE.match(line)
            if head:
                current = _parts(head.group(1))
                tables.setdefault(".".join(current), n)
                continue
            key = _KEY_RE.match(line)
            if key:
                # `a.run = ...` under [steps] is key `run` of table `steps.a`.
                parts = _parts(key.group(1))
                for i, part in enumerate(parts):
                    prefix = current + parts[:i]
                    if i:
                        tables.setdefault(".".join(prefix), n)
                    self._keys.setdefault((".".join(prefix), part), n)
        self._tables = tables
        return tables

    def line_of(self, table: str, key: str | None = None) -> int | None:
        tables = self._index()
        if key is not None:
            line = self._keys.get((table, key))
            if line is not None:
                return line
        return tables.get(table)

    def where(self, table: str, key: str | None = None, line: int | None = None) -> str:
        if line is None:
            line = self.line_of(table, key)
        loc = f"{self.path}:{line}" if line else str(self.path)
        return f"{loc}: [{table}]" + (f" {key}" if key else "")


class JobFileError(InvalidInputError):
    """Every problem found in one job file (up to ``MAX_PROBLEMS``), each ``file:line: ...``.

    The message is one line (errors are one line); the command line prints ``problems`` one per
    line when there are several."""

    def __init__(self, path: Path, problems: list[str], more: int = 0) -> None:
        self.path = path
        self.problems = list(problems)
        self.more = more
        if len(problems) == 1 and not more:
            text = problems[0]
        else:
            text = f"{path}: {self.count} problems: {'; '.join(problems)}" + (
                f"; and {more} more" if more else "")
        super().__init__(text)

    @property
    def count(self) -> int:
        return len(self.problems) + self.more

    def summary(self) -> str:
        """The last line after the problems were printed one per line."""
        more = f" (the first {len(self.problems)} shown)" if self.more else ""
        return f"{self.path}: {self.count} problems in the job file{more}; fix them and run again"


class Problems:
    """Collects problems; ``check`` raises ``JobFileError`` with them in file order, if any."""

    def __init__(self, loc: Locator) -> None:
        self.loc = loc
        self.found: list[tuple[int, str]] = []
        self.more = 0

    def add(self, table: str | None, key: str | None, message: str) -> None:
        if len(self.found) >= MAX_PROBLEMS:
            self.more += 1
            return
        if table is None:
            self.found.append((0, f"{self.loc.path}: {message}"))
        else:
            line = self.loc.line_of(table, key)
            self.found.append((line or 0, f"{self.loc.where(table, key, line)}: {message}"))

    def __bool__(self) -> bool:
        return bool(self.found)

    def check(self) -> None:
        if self.found:
            ordered = [text for _, text in sorted(self.found, key=lambda f: f[0])]
            raise JobFileError(self.loc.path, ordered, self.more)


def find_job_file(name: str, start: str | None = None) -> Path | None:
    """The nearest ``name`` walking up from ``start`` (default: the current directory), as the runs
    directory is found: shown as ``name`` when it is here, else by its absolute path."""
    import os

    here = Path(start or os.getcwd()).absolute()
    for d in (here, *here.parents):
        candidate = d / name
        if candidate.is_file():
            return Path(name) if d == here else candidate
    return None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'combine'?)`` for the closest known name, or "" when none is close."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
