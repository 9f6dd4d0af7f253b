"""The console sessions of the shipped skills, run for real: each ``$ command`` of a skill's
``console`` blocks runs in one temp directory (blocks share it, in order), and what it prints must be
what the skill shows, after a few normalisations (the directory, time stamps, durations).

A command line holding a heredoc (``<<'EOF'``) takes the lines up to ``EOF`` with it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SHOWN_DIR = "/home/me/project"  # where the skills' sessions say they run
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
COMPACT_STAMP = re.compile(r"\d{8}T\d{6}Z")
DURATION = re.compile(r"\b\d+(?:\.\d+)?(?:ms|s)\b")
# A correlation id is new on every call (OmniNode's checkpoint_manager.py prints one).
CORRELATION = re.compile(r'("correlation_id": )"[0-9a-f-]{36}"')
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Step:
    command: str
    expected: str
    line: int


def sessions(text: str) -> list[Step]:
    """Every ``$ command`` of the page's console blocks, with the output shown after it."""
    lines = text.splitlines()
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        i += 1
        if not m:
            continue
        lang = m.group(1)
        body_start = i
        while i < len(lines) and not FENCE.match(lines[i]):
            i += 1
        body = lines[body_start:i]
        i += 1
        if lang != "console":
            continue
        j = 0
        while j < len(body):
            if not body[j].startswith("$ "):
                raise ValueError(f"line {body_start + j + 1}: console output before any command")
            command = [body[j][2:]]
            at = body_start + j + 1
            j += 1
            if "<<'EOF'" in command[0]:
                while j < len(body) and body[j] != "EOF":
                    command.append(body[j])
                    j += 1
                command.append("EOF")
                j += 1
            out = []
            while j < len(body) and not body[j].startswith("$ "):
                out.append(body[j])
                j += 1
            steps.append(Step("\n".join(command), "\n".join(out), at))
    return steps


def normal(text: str, here: str) -> str:
    text = text.replace(here, SHOWN_DIR)
    text = STAMP.sub("<T>", text)
    text = COMPACT_STAMP.sub("<T>", text)
    text = CORRELATION.sub(r'\1"<id>"', text)
    return DURATION.sub("<D>", text).rstrip("\n")


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "100"
    return env


def run(step: Step, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(["bash", "-c", step.command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120, check=False)
    return proc.stdout


if __name__ == "__main__":  # print a skill's session as it runs now (to write or refresh a skill)
    import tempfile

    page = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "project"
        work.mkdir()
        env = environment(Path(tmp))
        for step in sessions(page.read_text()):
            print(f"$ {step.command}")
            got = run(step, work, env).replace(str(work), SHOWN_DIR).rstrip("\n")
            if got:
                print(got)
