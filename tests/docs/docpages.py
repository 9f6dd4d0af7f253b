"""The docs site's pages as the tests read them: which pages are which (from mkdocs.yml's nav), and
their code blocks with the markers that say how each is tested.

A marker is an HTML comment on the line just above a block's opening fence (invisible on the site):

    <!-- illustrative: WHY -->        not run: it installs, needs a server, takes minutes...
    <!-- walkthrough: TEST FILE -->   run by that test (tests/postgres/test_pg_walkthrough.py)
    <!-- doctest: exit N -->          a shell block that must end with exit code N (default 0)
    <!-- doctest: setup CODE -->      a Python block run with CODE (one line) before it
    <!-- doctest: continue -->        a Python block run after the page's previous Python blocks

A shell block is fenced as sh, bash, shell or console; a Python block as python or py. Blocks
without a language (a command's output, a synopsis) are text, never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SHELL = {"sh", "bash", "shell", "console"}
PYTHON = {"python", "py"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>illustrative|walkthrough|doctest)\s*:?\s*(?P<arg>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None  # "illustrative", "walkthrough" or "doctest"
    arg: str  # the marker's text after its kind

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.marker not in ("illustrative", "walkthrough")

    @property
    def expected_exit(self) -> int:
        m = re.fullmatch(r"exit (\d+)", self.arg) if self.marker == "doctest" else None
        return int(m.group(1)) if m else 0


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and s == fence[0] * len(s)


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, in order, with the marker just above it (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not _closes(lines[i], fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        above = MARKER.match(lines[start - 1]) if start > 0 else None
        out.append(Block(page=str(path.relative_to(ROOT)), line=start + 1, lang=m.group("lang").lower(),
                         code="\n".join(body) + "\n", marker=above.group("kind") if above else None,
                         arg=above.group("arg") if above else ""))
    return out


def _nav_files(entries: object) -> list[str]:
    files: list[str] = []
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        for e in entries:
            files += _nav_files(e)
    elif isinstance(entries, dict):
        for v in entries.values():
            files += _nav_files(v)
    return files


def nav() -> dict[str, list[str]]:
    """mkdocs.yml's nav: section title -> its pages (a top-level page is a section of its own)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    out: dict[str, list[str]] = {}
    for entry in config["nav"]:
        ((title, value),) = entry.items()
        out[title] = _nav_files(value)
    return out


def tutorial_pages() -> list[Path]:
    """The pages whose every shell block runs or says why not: the README, Getting started, the
    guides, and the pages that put another tool's commands beside resumable's."""
    sections = nav()
    names = [*sections["Getting started"], *sections["Guides"], *sections["Coming from another tool"]]
    return [ROOT / "README.md", *(DOCS / n for n in names)]


def all_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
