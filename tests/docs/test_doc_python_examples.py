"""Every Python example of the README and the docs site runs, as it is written, in a fresh
interpreter in an empty directory: exit 0, no traceback. A block marked ``<!-- doctest: continue -->``
runs after the page's Python blocks before it (it goes on with their names); ``<!-- doctest: setup
CODE -->`` runs CODE first (one line that gives an example what its page assumes, such as the ids
it loops over). See docpages.py for the markers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docpages import PYTHON, Block, all_pages, blocks


def examples() -> list[tuple[Block, str]]:
    """(block, the program that runs it) for every Python block that runs."""
    out: list[tuple[Block, str]] = []
    for page in all_pages():
        before: list[str] = []
        for block in blocks(page):
            if block.lang not in PYTHON:
                continue
            code = block.code
            if block.marker == "doctest" and block.arg.startswith("setup "):
                code = block.arg.removeprefix("setup ") + "\n" + code
            if block.marker == "doctest" and block.arg == "continue":
                code = "\n".join(before) + "\n" + code
            before.append(code)
            if block.runs:
                out.append((block, code))
    return out


EXAMPLES = examples()


@pytest.mark.parametrize(("block", "code"), EXAMPLES, ids=[b.where for b, _ in EXAMPLES])
def test_the_example_runs(block: Block, code: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ULPI_", "ONEX_"))}
    env.update(HOME=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, f"{block.where}: {proc.stderr[-3000:]}"


def test_there_are_examples_to_run() -> None:
    pages = {b.page for b, _ in EXAMPLES}
    assert {"README.md", "docs/getting-started.md", "docs/durable.md", "docs/scripts.md"} <= pages, pages
    assert not [b.where for p in all_pages() for b in blocks(p) if b.lang in PYTHON and b.marker == "walkthrough"]


def test_the_readme_example_is_five_lines_and_resumes(tmp_path: Path) -> None:
    """The README's @run.step example: five lines; run twice, the second run computes nothing and
    prints the same."""
    (code,) = [c for b, c in EXAMPLES if b.page == "README.md"]
    assert len(code.strip().splitlines()) == 5
    script = tmp_path / "squares.py"
    counted = "print('computing', n, file=__import__('sys').stderr); return n * n"
    script.write_text(code.replace("return n * n", counted))
    first = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=True)
    again = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert first.stdout == again.stdout == "[0, 1, 4, 9, 16] done\n"
    assert first.stderr.count("computing") == 5 and "computing" not in again.stderr
