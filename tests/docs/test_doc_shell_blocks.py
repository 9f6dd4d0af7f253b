"""Every shell block of the README, Getting started, the guides and the "coming from" pages runs as
it is written, in order, in an empty directory (with a copy of examples/), and ends with the exit
code its page says (0 unless marked ``<!-- doctest: exit N -->``); a block that cannot run there
says why in its page's source (``<!-- illustrative: WHY -->``). See docpages.py for the markers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docpages import ROOT, SHELL, all_pages, blocks, tutorial_pages

BIN = Path(sys.executable).parent  # the `resumable` of this checkout


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def shell_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ULPI_", "ONEX_", "PG"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp / "home"), NO_COLOR="1",
               XDG_STATE_HOME=str(tmp / "home" / ".local" / "state"), LC_ALL="C.UTF-8")
    (tmp / "home").mkdir(exist_ok=True)
    return env


@pytest.mark.parametrize("page", tutorial_pages(), ids=page_id)
def test_every_shell_block_runs(page: Path, tmp_path: Path) -> None:
    shell = [b for b in blocks(page) if b.lang in SHELL]
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples", ignore=shutil.ignore_patterns(".resumable", "build"))
    env = shell_env(tmp_path)
    for block in shell:
        if not block.runs:
            continue
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=work, env=env,
                              capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, check=False)
        assert proc.returncode == block.expected_exit, (
            f"{block.where}: exit {proc.returncode}, expected {block.expected_exit}\n"
            f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
        assert "Traceback" not in proc.stderr, f"{block.where}: {proc.stderr[-3000:]}"


@pytest.mark.parametrize("page", tutorial_pages(), ids=page_id)
def test_a_block_that_does_not_run_says_why(page: Path) -> None:
    for block in blocks(page):
        if block.marker == "illustrative":
            assert block.arg, f"{block.where}: say why it does not run: <!-- illustrative: WHY -->"
        if block.marker == "walkthrough":
            test = ROOT / block.arg.split()[0]
            assert test.is_file(), f"{block.where}: the walkthrough's test {block.arg!r} does not exist"
            assert page.name in test.read_text(), f"{test} does not read {page.name}"


def test_markers_are_known_and_stand_above_a_block() -> None:
    """A misspelt marker, or one that is not just above a fence, would quietly run (or skip) the
    wrong block: every marker comment must be one of the known ones, directly above a block."""
    import re

    for page in all_pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        starts = {b.line - 2 for b in blocks(page)}  # 0-based index of the line above each fence
        for n, line in enumerate(lines):
            if re.match(r"\s*<!--\s*(illustrative|walkthrough|doctest)\b", line):
                assert n in starts, f"{page_id(page)}:{n + 1}: a marker must be on the line just above a fence"
                kind = line.split("<!--")[1].split(":")[0].strip()
                if kind == "doctest":
                    arg = line.split(":", 1)[1].rsplit("-->", 1)[0].strip()
                    assert re.fullmatch(r"exit \d+|setup .+|continue", arg), f"{page_id(page)}:{n + 1}: {arg!r}"


def test_the_pages_have_shell_blocks_that_run() -> None:
    """The test above cannot pass by finding nothing: the tutorial pages hold dozens of blocks that run."""
    running = [b for p in tutorial_pages() for b in blocks(p) if b.lang in SHELL and b.runs]
    assert len(running) >= 15, [b.where for b in running]
    assert any(b.page == "docs/getting-started.md" and b.expected_exit == 130 for b in running)
