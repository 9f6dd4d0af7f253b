"""The shipped skills: valid for the format's reference validator (``agentskills validate``, from
skills-ref), short, and exact: every command of their sessions runs and prints what they show, and
every `resumable ...` they mention inline is a command with those options."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from skillsession import SHOWN_DIR, environment, normal, run, sessions

from resumable import skills

BIN = Path(sys.executable).parent
SKILLS = Path(skills.__file__).parent
NAMES = ["checkpoint-resume", "phase-checkpoint", "step-runner"]
INLINE = re.compile(r"`(resumable [^`]+)`")


def test_the_three_skills_are_shipped() -> None:
    assert skills.names() == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_validator_accepts_it(name: str) -> None:
    proc = subprocess.run([str(BIN / "agentskills"), "validate", str(SKILLS / name)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Valid skill" in proc.stdout


def test_the_validator_is_not_a_rubber_stamp(tmp_path: Path) -> None:
    """A copy under another folder name fails it: the check above can fail."""
    bad = tmp_path / "Not-A-Name"
    bad.mkdir()
    (bad / "SKILL.md").write_bytes(skills.text("step-runner"))
    proc = subprocess.run([str(BIN / "agentskills"), "validate", str(bad)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1


@pytest.mark.parametrize("name", NAMES)
def test_it_is_short(name: str) -> None:
    text = skills.text(name).decode()
    assert len(text.splitlines()) < 200 and len(text.split()) < 1500  # the format asks for < 500 lines
    assert len(skills.description(name)) <= 1024


@pytest.mark.parametrize("name", NAMES)
def test_every_command_of_its_session_prints_what_it_shows(name: str, tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    env = environment(tmp_path)
    steps = sessions(skills.text(name).decode())
    assert len(steps) >= 4
    for step in steps:
        got = normal(run(step, work, env), str(work))
        assert got == normal(step.expected, SHOWN_DIR), f"{name}/SKILL.md:{step.line}: $ {step.command}\n{got}"


@pytest.mark.parametrize("name", NAMES)
def test_every_command_it_mentions_exists_with_those_options(name: str, tmp_path: Path) -> None:
    text = skills.text(name).decode()
    mentioned = INLINE.findall(text)
    assert mentioned
    env = environment(tmp_path)
    for command in mentioned:
        words = shlex.split(command)
        proc = subprocess.run([str(BIN / "resumable"), *words[1:2], "--help"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=60, check=False)
        assert proc.returncode == 0, (command, proc.stderr)
        helps = proc.stdout
        if len(words) > 2 and not words[2].startswith("-"):
            sub = subprocess.run([str(BIN / "resumable"), words[1], words[2], "--help"], capture_output=True,
                                 text=True, env=env, cwd=tmp_path, timeout=60, check=False)
            if sub.returncode == 0 and sub.stdout.startswith(f"Usage: resumable {words[1]} {words[2]}"):
                helps += sub.stdout
        for option in (w.split("=", 1)[0] for w in words if w.startswith("--")):
            assert option in helps, (command, option)
