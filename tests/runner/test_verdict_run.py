"""The run that ends with every step done keeps the next re-run's answer itself (runner.verdict):
the first re-run after a run neither parses the job file, nor decodes the run, nor plans. Every
change the long way would see still sends the re-run the long way; a file written in the last
moments is kept with its content hash, and an edit that keeps its size, mtime_ns and inode is
caught by hashing it again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runnerhelpers import HOUR_NS, doc, run_cli, verdict_job, write

from resumable.cli.main import main
from resumable.runner import explain, scheduler, session, verdict
from resumable.store.files.backend import FileRunHandle

JOB = verdict_job("vr")


def _kept(work: Path) -> list[Path]:
    return sorted((work / "runs" / ".cache").glob("verdict.*"))


def _first_run(work: Path, job: str = JOB) -> None:
    (work / "data").mkdir(exist_ok=True)
    (work / "out").mkdir(exist_ok=True)
    write(work / "data" / "a.csv", "1,2,3\n")
    write(work / "resumable.toml", job)
    result = run_cli([])
    assert result.exit_code == 0, result.output


def _refuse_the_long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, parsing the job, decoding the run or planning a step fails the test."""
    def refuse(*_args: object, **_kw: object) -> None:
        raise AssertionError("took the long way")
    monkeypatch.setattr(explain, "plan", refuse)
    monkeypatch.setattr(session, "load_job", refuse)
    monkeypatch.setattr(FileRunHandle, "load", refuse)


def _long_way(work: Path) -> tuple[str, str]:
    """(a no-op re-run's output, a dry run's) the long way (the kept answer put aside, then back)."""
    kept = {f: f.read_bytes() for f in _kept(work)}
    for f in kept:
        f.unlink()
    again, dry = run_cli([]).output, run_cli(["--dry-run"]).output
    for f, data in kept.items():
        f.write_bytes(data)
    return again, dry


@pytest.mark.parametrize("racy", [0, HOUR_NS])
def test_the_first_re_run_after_a_run_is_answered_from_the_answer_the_run_kept(
        work: Path, monkeypatch: pytest.MonkeyPatch, racy: int) -> None:
    # racy: every file counts as just written (kept with its hash, hashed again) or none does.
    monkeypatch.setattr(verdict, "_RACY_NS", racy)
    _first_run(work)
    assert len(_kept(work)) == 1
    kept = _kept(work)[0].read_bytes()
    assert kept.endswith(b"\n") == (racy == 0)  # the last line: the racy files' hashes
    journal = (work / "runs" / "vr.journal.jsonl").read_bytes()
    again, dry = _long_way(work)
    with monkeypatch.context() as m:
        _refuse_the_long_way(m)
        assert run_cli([]).output == again
        assert run_cli(["--dry-run"]).output == dry
    assert "skip  a: done" in dry and "0 to run, 3 to skip" in dry
    assert (work / "runs" / "vr.journal.jsonl").read_bytes() == journal  # nothing written


def test_an_artifact_rewritten_within_its_mtime_tick_runs_its_step_again(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict, "_RACY_NS", HOUR_NS)  # however slow this machine, all just written
    _first_run(work)
    assert len(_kept(work)) == 1
    target = work / "out" / "a.txt"
    st = target.stat()
    with open(target, "r+b") as f:  # in place: same inode, same size, other bytes
        f.write(b"9")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the very mtime_ns it had
    now = target.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert "run   a: artifact changed: out/a.txt" in run_cli(["--dry-run"]).output
    result = run_cli([])
    assert result.exit_code == 0
    assert target.read_text() == "1,2,3\n"  # made again
    assert doc(work, "vr")["units"]["a"]["attempts"][-1]["n"] == 2


def test_an_input_rewritten_within_its_mtime_tick_runs_its_step_again(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict, "_RACY_NS", HOUR_NS)
    _first_run(work)
    target = work / "data" / "a.csv"
    st = target.stat()
    with open(target, "r+b") as f:
        f.write(b"7")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "run   a: input changed: data/a.csv" in run_cli(["--dry-run"]).output
    assert run_cli([]).exit_code == 0
    assert (work / "out" / "a.txt").read_text() == "7,2,3\n"


@pytest.mark.parametrize("how", ["input", "artifact", "new-inode"])
def test_an_edit_after_the_run_is_noticed(work: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.setattr(verdict, "_RACY_NS", 0)  # no hash kept: the stats alone must tell
    _first_run(work)
    assert len(_kept(work)) == 1
    target = work / ("out/a.txt" if how == "artifact" else "data/a.csv")
    st = target.stat()
    if how == "new-inode":
        other = work / "data" / "new.csv"
        write(other, "4,5,6\n")
        os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(other, target)
    else:
        with open(target, "r+b") as f:
            f.write(b"9")
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    expected = "artifact changed: out/a.txt" if how == "artifact" else "input changed: data/a.csv"
    assert f"run   a: {expected}" in run_cli(["--dry-run"]).output


def test_a_write_by_another_command_or_another_launch_is_noticed(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _first_run(work)
    assert len(_kept(work)) == 1
    assert main(["rerun", "vr", "c", "--reason", "by hand"]) == 0  # no runner lease: the journal grows
    assert "run   c: by hand" in run_cli(["--dry-run"]).output
    assert run_cli([]).exit_code == 0
    assert len(_kept(work)) == 1  # kept again by that run
    assert run_cli(["-j", "2"]).exit_code == 0
    assert doc(work, "vr")["launch"]["argv"] == ["resumable", "run", "-j", "2"]


@pytest.mark.parametrize("pattern", ["data/*.csv", "data"])
def test_a_run_with_a_glob_or_a_directory_input_keeps_nothing(work: Path, pattern: str) -> None:
    _first_run(work, f'[job]\nname = "vg"\n[steps.a]\nrun = "true"\ninputs = ["{pattern}"]\n')
    assert _kept(work) == []
    write(work / "data" / "b.csv", "2\n")
    assert "run   a: input added: data/b.csv" in run_cli(["--dry-run"]).output


def test_a_run_that_failed_or_was_interrupted_keeps_nothing(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (work / "data").mkdir()
    write(work / "resumable.toml", '[job]\nname = "vf"\n[steps.a]\nrun = "true"\n[steps.b]\nrun = "false"\n')
    assert run_cli([]).exit_code == 1
    assert _kept(work) == []
    write(work / "resumable.toml", '[job]\nname = "vf"\n[steps.a]\nrun = "true"\n[steps.b]\nrun = "true"\n')
    original = scheduler.Scheduler.run

    def interrupted(self: scheduler.Scheduler) -> object:
        out = original(self)
        out.interrupted = True  # as a Ctrl-C after the last step
        return out
    monkeypatch.setattr(scheduler.Scheduler, "run", interrupted)
    assert run_cli([]).exit_code == 130
    assert _kept(work) == []


def test_a_racy_file_once_settled_is_no_longer_hashed(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict, "_RACY_NS", HOUR_NS)
    _first_run(work)
    assert not _kept(work)[0].read_bytes().endswith(b"\n")  # hashes kept for the racy files
    hashed: list[str] = []
    original = verdict._sha256_file

    def counted(path: str) -> str | None:
        hashed.append(path)
        return original(path)
    monkeypatch.setattr(verdict, "_sha256_file", counted)
    again = run_cli([]).output
    assert hashed and all(p.endswith(("a.csv", "a.txt")) for p in hashed)
    monkeypatch.setattr(verdict, "_RACY_NS", 0)  # as if the seconds had passed
    hashed.clear()
    assert run_cli([]).output == again  # hashed again, the same, and settled: kept without hashes
    assert hashed
    assert _kept(work)[0].read_bytes().endswith(b"\n")
    hashed.clear()
    with monkeypatch.context() as m:
        _refuse_the_long_way(m)
        assert run_cli([]).output == again
    assert hashed == []
