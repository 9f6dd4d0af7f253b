"""A re-run with nothing to do is answered from the answer the last one kept (runner.verdict) only
while everything it rests on is as it was: the job file, the run's files, every input and artifact
by size, mtime_ns and inode. Any change takes the long way, which gives the exact answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runnerhelpers import HOUR_NS, doc, run_cli, verdict_job, write

from resumable.cli.main import main
from resumable.runner import explain, verdict

JOB = verdict_job("vj")


def _age(path: Path) -> None:
    """Back-date a file an hour: a file modified in the last seconds is never vouched for."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns - HOUR_NS, st.st_mtime_ns - HOUR_NS))


def _setup(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Files written a moment ago are vouched for here (the test below checks that they are not,
    # normally): the test cannot wait for its files' mtimes to settle.
    monkeypatch.setattr(verdict, "_RACY_NS", 0)
    (work / "data").mkdir()
    (work / "out").mkdir()
    write(work / "data" / "a.csv", "1,2,3\n")
    write(work / "resumable.toml", JOB)
    assert run_cli([]).exit_code == 0


def _kept(work: Path) -> list[Path]:
    return sorted((work / "runs" / ".cache").glob("verdict.*"))


def _no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, deciding a step the long way fails the test."""
    def refuse(*_args: object, **_kw: object) -> None:
        raise AssertionError("planned the long way")
    monkeypatch.setattr(explain, "plan", refuse)


def _kept_answer(work: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(a no-op re-run's output, a dry run's), the long way, after which both are kept."""
    for f in _kept(work):
        f.unlink()
    again = run_cli([])
    assert again.exit_code == 0, again.output
    dry = run_cli(["--dry-run"])
    assert dry.exit_code == 0
    assert len(_kept(work)) == 1
    return again.output, dry.output


def test_a_re_run_with_nothing_to_do_answers_as_the_long_way_without_planning(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _setup(work, monkeypatch)
    again, dry = _kept_answer(work, monkeypatch)
    journal = (work / "runs" / "vj.journal.jsonl").read_bytes()
    _no_plan(monkeypatch)
    assert run_cli([]).output == again
    assert run_cli(["--dry-run"]).output == dry
    assert "skip  a: done" in dry and "0 to run, 3 to skip" in dry
    assert (work / "runs" / "vj.journal.jsonl").read_bytes() == journal  # nothing written


@pytest.mark.parametrize("how", ["same-second", "new-inode", "artifact"])
def test_an_edit_keeping_size_and_second_or_mtime_is_noticed(
        work: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    _setup(work, monkeypatch)
    _kept_answer(work, monkeypatch)
    target = work / ("out/a.txt" if how == "artifact" else "data/a.csv")
    st = target.stat()
    if how == "new-inode":
        # Another file, same size, given the very mtime_ns of the one it replaces.
        other = work / "data" / "new.csv"
        write(other, "4,5,6\n")
        os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(other, target)
        assert (target.stat().st_size, target.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    else:
        with open(target, "r+b") as f:  # in place: same inode, same size
            f.write(b"9")
        # Within the same second as before (one nanosecond on, where the file system keeps ns).
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    dry = run_cli(["--dry-run"])
    expected = "artifact changed: out/a.txt" if how == "artifact" else "input changed: data/a.csv"
    assert f"run   a: {expected}" in dry.output


def test_a_write_to_the_run_or_another_launch_is_noticed(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _setup(work, monkeypatch)
    _kept_answer(work, monkeypatch)
    # Another command (no runner lease) sends c back: the journal grows, the kept answer is stale.
    assert main(["rerun", "vj", "c", "--reason", "by hand"]) == 0
    assert "run   c: by hand" in run_cli(["--dry-run"]).output
    assert run_cli([]).exit_code == 0
    _kept_answer(work, monkeypatch)
    # Launched another way: the long way records the new launch (nothing_to_do is False).
    assert run_cli(["-j", "2"]).exit_code == 0
    assert doc(work, "vj")["launch"]["argv"] == ["resumable", "run", "-j", "2"]


def test_no_answer_is_kept_for_a_glob(work: Path) -> None:
    (work / "data").mkdir()
    write(work / "data" / "a.csv", "1\n")
    _age(work / "data" / "a.csv")
    write(work / "resumable.toml", '[job]\nname = "vg"\n[steps.a]\nrun = "true"\ninputs = ["data/*.csv"]\n')
    assert run_cli([]).exit_code == 0
    assert run_cli([]).exit_code == 0
    assert _kept(work) == []  # a new match would change the answer
    write(work / "data" / "b.csv", "2\n")
    assert "input added: data/b.csv" in run_cli(["--dry-run"]).output
