"""Families of steps at run time: a family driven by files follows the files (a new one is one more
step, and only it runs; a removed one's instance is marked removed), the kept re-run answer sees a
file come or go, a family is a target, and the views show a family as one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from runnerhelpers import doc, run_cli, status_of, units, write

from resumable.runner import explain, session, verdict
from resumable.store.files.backend import FileRunHandle

JOB = """[job]
name = "fam"
[steps.clean]
files = "raw/{shard}.csv"
run = "mkdir -p out && tr a-z A-Z < raw/{shard}.csv > out/{shard}.csv && echo {shard} >> trace"
inputs = ["raw/{shard}.csv"]
artifacts = ["out/{shard}.csv"]
[steps.merge]
run = "cat {clean.artifacts} > merged.csv && echo merge >> trace"
artifacts = ["merged.csv"]
"""


def _trace(work: Path) -> list[str]:
    path = work / "trace"
    out = path.read_text().split() if path.exists() else []
    path.unlink(missing_ok=True)
    return out


@pytest.fixture
def shards(work: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Nothing counts as just written: a directory listed a moment ago is kept by its stat alone.
    monkeypatch.setattr(verdict, "_RACY_NS", 0)
    (work / "raw").mkdir()
    for shard in ("01", "02", "03"):
        write(work / "raw" / f"{shard}.csv", f"shard {shard}\n")
    write(work / "resumable.toml", JOB)
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert sorted(_trace(work)) == ["01", "02", "03", "merge"]
    return work


def _long_way_refused(mp: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("took the long way")
    mp.setattr(explain, "plan", refuse)
    mp.setattr(session, "load_job", refuse)
    mp.setattr(FileRunHandle, "load", refuse)


def test_a_new_file_is_one_more_step_and_only_it_runs(shards: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:  # nothing changed: the kept answer, no parse, no plan
        _long_way_refused(mp)
        assert run_cli([]).output.endswith("fam: done (4 skipped)\n")
    write(shards / "raw" / "04.csv", "shard 04\n")
    assert "run   clean: 1 of 4 instances (clean+04: never ran); 3 skip (done)" in run_cli(["--dry-run"]).output
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert _trace(shards) == ["04", "merge"]  # merge: one input more (its command names it)
    assert status_of(shards, "fam")["clean+04"] == "done"
    assert (shards / "merged.csv").read_text().split("\n")[-2] == "SHARD 04"
    with pytest.MonkeyPatch.context() as mp:
        _long_way_refused(mp)
        assert run_cli([]).output.endswith("fam: done (5 skipped)\n")


def test_a_removed_file_marks_its_instance_removed(shards: Path) -> None:
    (shards / "raw" / "02.csv").unlink()
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert _trace(shards) == ["merge"]
    assert r.output.endswith("fam: done (1 done, 2 skipped, 1 removed)\n")
    u = units(shards, "fam")["clean+02"]
    assert u["status"] == "done" and u["removed"] is True  # kept, with its history: never deleted
    assert (shards / "out" / "02.csv").exists()  # its artifact is left where it is
    assert "SHARD 02" not in (shards / "merged.csv").read_text()
    from resumable.cli.main import main

    out = _status(shards, main)
    assert "removed 1" in out and "clean  2/2 done · removed 1" in out
    # The file comes back as it was: the mark is cleared and the instance, done and unchanged, skips.
    write(shards / "raw" / "02.csv", "shard 02\n")
    r = run_cli([])
    assert r.exit_code == 0 and _trace(shards) == ["merge"], r.output
    assert "removed" not in units(shards, "fam")["clean+02"] or units(shards, "fam")["clean+02"]["removed"] is False


def _status(work: Path, main: object, *args: str) -> str:
    from click.testing import CliRunner

    from resumable.cli.status import status_command

    r = CliRunner().invoke(status_command, ["fam", *args], catch_exceptions=False)
    return r.output


def test_a_removed_instance_that_failed_keeps_the_run_open_and_says_so(work: Path) -> None:
    """The checkpoint contract finalizes a run done only when every unit is done: an instance
    whose file is gone keeps its state, and one that failed keeps the run needs_attention (as
    any step a job no longer has), saying which; its file back, it runs again."""
    (work / "raw").mkdir()
    for shard in ("01", "02"):
        write(work / "raw" / f"{shard}.csv", shard)
    write(work / "resumable.toml", '[job]\nname = "fam"\n[steps.c]\nfiles = "raw/{s}.csv"\n'
                                   'run = "test $(cat raw/{s}.csv) != 02"\ninputs = ["raw/{s}.csv"]\n')
    assert run_cli([]).exit_code == 1
    (work / "raw" / "02.csv").unlink()
    r = run_cli([])
    assert r.exit_code == 1
    assert "units this job no longer has, not done: c+02" in r.output
    u = units(work, "fam")["c+02"]
    assert (u["status"], u["removed"]) == ("failed", True)
    write(work / "raw" / "02.csv", "fixed")
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert doc(work, "fam")["status"] == "done"


def test_a_family_is_a_target_and_so_is_one_instance(shards: Path) -> None:
    write(shards / "raw" / "01.csv", "edited\n")
    write(shards / "raw" / "02.csv", "edited\n")
    r = run_cli(["clean+02"])
    assert r.exit_code == 0, r.output
    assert _trace(shards) == ["02"]
    r = run_cli(["--dry-run", "clean"])
    assert r.output.splitlines() == [
        "run   clean: 1 of 3 instances (clean+01: input changed: raw/01.csv); 2 skip (done)",
        "1 to run, 2 to skip, 1 not selected (dry run: nothing executed or written)"]
    assert run_cli(["clean"]).exit_code == 0 and _trace(shards) == ["01"]
    r = run_cli(["clen"])
    assert r.exit_code == 1 and "has no step 'clen' (did you mean 'clean'?)" in r.output


def test_explain_a_family_and_an_instance(shards: Path) -> None:
    write(shards / "raw" / "03.csv", "edited\n")
    assert run_cli(["--explain", "clean"]).output.splitlines() == [
        "run   clean: 1 of 3 instances (clean+03: input changed: raw/03.csv); 2 skip (done)",
        "      run   clean+03: input changed: raw/03.csv"]
    assert run_cli(["--explain", "clean+01"]).output == "skip  clean+01: done\n"
    # -v: a line per instance, as without families.
    lines = run_cli(["--dry-run", "-v"]).output.splitlines()
    assert lines[:3] == ["skip  clean+01: done", "skip  clean+02: done", "run   clean+03: input changed: raw/03.csv"]


def test_failed_instances_are_expanded_under_their_familys_line(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "fam"\n[steps.c]\nparams = { n = { from = 1, to = 30 } }\n'
                                   'run = "test {n} -lt 28"\n')
    r = run_cli(["--keep-going", "-j", "2"])
    assert r.exit_code == 1
    assert "c: 30 of 30 instances ended (27 done, 3 failed)" in r.output  # one line when the family ends
    lines = run_cli(["--dry-run"]).output.splitlines()
    assert lines == [
        "run   c: 3 of 30 instances (c+28: failed last time (exit code 1); c+29: failed last time (exit code 1);"
        " c+30: failed last time (exit code 1)); 27 skip (done)",
        "      run   c+28: failed last time (exit code 1)",
        "      run   c+29: failed last time (exit code 1)",
        "      run   c+30: failed last time (exit code 1)",
        "3 to run, 27 to skip (dry run: nothing executed or written)"]
    from resumable.cli.main import main

    out = _status(work, main)
    assert "families c  27/30 done · failed 3" in out
    assert "✗ c+28" in out and "✗ c+30" in out  # the instances that need a human, each a line
    from resumable.api import open_run

    page = open_run("fam").report_html()
    assert "<h2>Families of steps (1)</h2>" in page
    assert "<li><b>c</b> 27/30 done · failed 3<ul" in page
    assert '<li><code>c+29</code> <span class="o-failed">failed</span></li>' in page


def test_the_opening_lines_of_a_run_group_a_family(shards: Path) -> None:
    for shard in ("01", "02"):
        write(shards / "raw" / f"{shard}.csv", "edited\n")
    lines = run_cli([]).output.splitlines()
    assert lines[0] == ("rerun  clean: 2 of 3 instances (clean+01: input changed: raw/01.csv; clean+02: input changed:"
                        " raw/02.csv); 1 skip (done)")
    assert lines[1].startswith("rerun  merge (upstream re-runs: clean+01, clean+02")
    assert "clean: 2 of 3 instances ended (2 done)" in lines


def test_stream_prefixes_each_instances_lines_and_ends_with_the_familys_line(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "fam"\n[steps.say]\nparams = { who = ["ann", "bob"] }\n'
                                   'run = "echo hello {who}"\n')
    out = run_cli(["--stream"]).output.splitlines()
    assert "say+ann | hello ann" in out and "say+bob | hello bob" in out
    assert "say: 2 of 2 instances ended (2 done)" in out
