"""The installed `resumable` command: a script of our own (not pip's entry-point wrapper, which
imports `re`), and what a seed verb loads through it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from corehelpers import RESUMABLE, cli, ok

ROOT = Path(__file__).resolve().parent.parent

# Each of these costs a millisecond or more to import; none is needed to record a transition.
HEAVY = {"re", "json", "enum", "typing", "pathlib", "dataclasses", "click", "orjson", "rich", "importlib",
         "collections", "functools", "inspect", "argparse"}


def _imported(*args: str, runs: Path) -> set[str]:
    """Modules imported by `resumable <args>`, through the installed script, beyond what the bare
    interpreter imports at start-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DIR"] = str(runs)

    def modules(*command: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-X", "importtime", *command], capture_output=True, text=True,
                              env=env, check=True)
        return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line} - {"imported package"}

    return modules(RESUMABLE, *args) - modules("-c", "pass")


def test_the_command_is_our_script() -> None:
    text = Path(RESUMABLE).read_text()
    assert text.startswith("#!") and "python" in text.splitlines()[0]
    assert "from resumable.cli import" in text
    code = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert "import re" not in code  # pip's console-script wrapper's first import
    assert text.split("\n", 1)[1] == (ROOT / "scripts" / "resumable").read_text().split("\n", 1)[1]


def test_a_transition_imports_nothing_heavy(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ok(cli("init", "r", "--task", "t", "--units", "a,b", runs=runs))
    extra = _imported("unit", "r", "a", "in_progress", runs=runs)
    assert not extra & HEAVY, sorted(extra & HEAVY)
    assert "resumable.store" in extra  # the measurement does see the verb's imports


def test_help_version_and_python_dash_m(tmp_path: Path) -> None:
    assert ok(cli("--version")) == "resumable, version 0.1.0\n"
    assert "Usage: resumable" in ok(cli("--help"))
    assert "Set a unit's state" in ok(cli("unit", "--help"))
    proc = subprocess.run([sys.executable, "-m", "resumable", "--version"], capture_output=True, text=True,
                          check=True)
    assert proc.stdout == "resumable, version 0.1.0\n"
