"""How steps start (runner.process): the short way (posix_spawn) gives a step what Popen gave it,
and every case it cannot serve goes through Popen."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from runnerhelpers import run_cli, spawn_cli, status_of, units, write

from resumable.runner import process

SHOW = ("import os, sys; fd = int(sys.argv[1]);"
        " print('inherited' if os.path.exists(f'/proc/self/fd/{fd}') else 'closed', os.getsid(0) == os.getpid())")


def test_a_step_inherits_no_descriptor_of_the_shell_and_default_signals(work: Path) -> None:
    """A descriptor the runner inherited (a shell's `3>file`, a CI agent's pipe) is not passed on to
    steps; the step leads its own session; SIGPIPE, which Python ignores, is at its default."""
    r, w = os.pipe()
    os.set_inheritable(w, True)
    write(work / "job.toml", '[job]\nname = "fds"\n'
          f'[steps.fds]\nrun = [{sys.executable!r}, "-c", "{SHOW}", "{w}"]\n'
          '[steps.signals]\nrun = ["grep", "^SigIgn", "/proc/self/status"]\n')
    try:
        proc = spawn_cli(["job.toml"], work, pass_fds=(w,))
        proc.communicate(timeout=60)
    finally:
        os.close(r)
        os.close(w)
    assert proc.returncode == 0
    u = units(work, "fds")
    assert Path(u["fds"]["attempts"][-1]["log"]).read_text().split() == ["closed", "True"]
    ignored = int(Path(u["signals"]["attempts"][-1]["log"]).read_text().split()[1], 16)
    assert not ignored & (1 << (13 - 1))  # SIGPIPE


def test_a_step_in_another_directory_and_a_missing_program(work: Path) -> None:
    """A step with its own cwd starts (through Popen, which can change directory); a program that
    is nowhere on PATH fails the step with exit 127 and the reason in its log."""
    (work / "sub").mkdir()
    write(work / "job.toml", '[job]\nname = "dirs"\n'
          '[steps.here]\nrun = ["pwd"]\ncwd = "sub"\n'
          '[steps.nowhere]\nrun = ["no-such-program-anywhere"]\n')
    r = run_cli(["job.toml", "--keep-going"])
    assert r.exit_code == 1
    assert status_of(work, "dirs") == {"here": "done", "nowhere": "failed"}
    u = units(work, "dirs")
    assert Path(u["here"]["attempts"][-1]["log"]).read_text().strip() == str(work / "sub")
    assert u["nowhere"]["attempts"][-1]["exitCode"] == 127
    assert "no-such-program-anywhere" in Path(u["nowhere"]["log"]).read_text()


def test_a_program_is_found_once_it_appears_and_again_when_it_moves(tmp_path: Path) -> None:
    """Only finds are remembered: a program a step builds later is found then; one that moved is
    looked up again."""
    bin1, bin2 = tmp_path / "bin1", tmp_path / "bin2"
    bin1.mkdir()
    bin2.mkdir()
    path = f"{bin1}:{bin2}"
    assert process._program("made-later", path) is None
    tool = bin2 / "made-later"
    tool.write_text("#!/bin/sh\necho from bin2\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert process._program("made-later", path) == str(tool)
    log = tmp_path / "log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)
    try:
        tool.unlink()  # gone since it was found: posix_spawn fails, the name is forgotten
        assert process._posix_spawn(["made-later"], {"PATH": path}, fd) is None
        assert ("made-later", path) not in process._PROGRAMS
    finally:
        os.close(fd)
