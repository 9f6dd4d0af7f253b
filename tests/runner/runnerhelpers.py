"""Helpers for the runner tests (their own module: another test directory has a conftest too):
run `resumable run` in-process (CliRunner) or as a real process
(for signals and crashes), and read the run document back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from resumable.cli.run import run_command

RUN_ARGV = [sys.executable, "-c",
            "from resumable.cli.run import run_command; run_command(prog_name='resumable run')"]


def run_cli(args: Sequence[str]) -> Result:
    return CliRunner().invoke(run_command, list(args), catch_exceptions=False)


def spawn_cli(args: Sequence[str], cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.setdefault("RESUMABLE_DIR", str(cwd / "runs"))
    return subprocess.Popen([*RUN_ARGV, *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def doc(work: Path, run_id: str) -> dict[str, Any]:
    from resumable.api import read_doc

    return read_doc(work / "runs" / f"{run_id}.json")


def units(work: Path, run_id: str) -> dict[str, Any]:
    out: dict[str, Any] = doc(work, run_id)["units"]
    return out


def status_of(work: Path, run_id: str) -> dict[str, str]:
    return {k: v["status"] for k, v in units(work, run_id).items()}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1)


HOUR_NS = 3600 * 10**9


def verdict_job(name: str) -> str:
    """A step with an input and an artifact, one that needs it, one with neither: what the kept
    re-run answers rest on."""
    return f"""[job]
name = "{name}"
[steps.a]
run = "cp data/a.csv out/a.txt"
inputs = ["data/a.csv"]
artifacts = ["out/a.txt"]
[steps.b]
run = "true"
needs = ["a"]
[steps.c]
run = ["true"]
"""
