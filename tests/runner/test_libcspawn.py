"""The C library's posix_spawn through ctypes: what a step gets (its own session, the signals Python
ignores back at their default, its output where asked, exactly its environment), what C cannot
carry refused."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from resumable.runner import libcspawn, process

pytestmark = pytest.mark.skipif(not libcspawn.available((signal.SIGPIPE,)), reason="not glibc")

# A shell, not Python: Python would ignore SIGPIPE again for itself. Prints the signals it
# ignores (a hex mask), its pid and session id, then its environment as the C library gave it.
PROBE = "grep ^SigIgn /proc/$$/status; cut -d' ' -f1,6 /proc/$$/stat; cat /proc/$$/environ"


def _run(tmp_path: Path, env: dict[str, str]) -> list[str]:
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        entries = [libcspawn.env_entry(k, v) for k, v in env.items()]
        pid = libcspawn.spawn("/bin/sh", ["sh", "-c", PROBE], entries, [(fd, 1), (fd, 2)], (signal.SIGPIPE,))
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.read_text()
    return out.read_text().split("\n", 2)


def test_a_step_gets_its_session_default_signals_output_and_environment(tmp_path: Path) -> None:
    # Python ignores SIGPIPE for itself; the child must have it back at its default.
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    env = {"A": "1", "LANG": "C.UTF-8", "ODD": "x=y é"}
    ignored, ids, environ = _run(tmp_path, env)
    assert not int(ignored.split()[1], 16) & (1 << (signal.SIGPIPE - 1))
    pid, sid = ids.split()
    assert pid == sid  # a session of its own
    assert environ.split("\0")[:3] == [f"{k}={v}" for k, v in env.items()]


def test_what_c_cannot_carry_is_refused() -> None:
    with pytest.raises(ValueError):
        libcspawn.env_entry("A\0B", "1")
    with pytest.raises(ValueError):
        libcspawn.env_entry("A=B", "1")
    with pytest.raises(ValueError):
        libcspawn.env_entry("", "1")
    with pytest.raises(ValueError):
        libcspawn.spawn("/bin/true", ["true", "a\0b"], [], [])


def test_a_missing_program_is_an_oserror() -> None:
    with pytest.raises(OSError):
        libcspawn.spawn("/nonexistent/program", ["program"], [], [])


def test_a_step_environment_is_its_base_with_its_own_variables_over_it() -> None:
    base = process.BaseEnv({"PATH": "/bin", "RESUMABLE_STEP": "old", "HOME": "/h"})
    env = process.StepEnv(base, {"RESUMABLE_STEP": "s1", "X": "2"})
    assert dict(env) == {"PATH": "/bin", "HOME": "/h", "RESUMABLE_STEP": "s1", "X": "2"}
    assert len(env) == 4 and env["PATH"] == "/bin" and env["RESUMABLE_STEP"] == "s1"
    assert sorted(env.encoded()) == sorted(f"{k}={v}".encode() for k, v in dict(env).items())
