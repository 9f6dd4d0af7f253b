"""Declared inputs mean what they say: globs expanded, directories walked, a missing path refused
with its line (unless another step makes it), each change named, and unchanged files not re-hashed."""

from __future__ import annotations

import os
from pathlib import Path

from runnerhelpers import run_cli, units, write

from resumable.runner import fingerprint as fp
from resumable.runner import inputs
from resumable.runner.jobfile import Step, load_job_file


def _concat_job(work: Path, pattern: str) -> None:
    write(work / "resumable.toml", f"""
[job]
name = "c"
[steps.concat]
run = "cat $(find data -type f | sort) > all.txt; echo run >> trace"
inputs = ["{pattern}"]
artifacts = ["all.txt"]
""")


def _plan(work: Path) -> str:
    r = run_cli(["--dry-run"])
    assert r.exit_code == 0, r.output
    return r.output


def test_a_glob_that_gains_and_loses_a_match(work: Path) -> None:
    (work / "data").mkdir()
    write(work / "data" / "a.csv", "a\n")
    write(work / "data" / "b.csv", "b\n")
    _concat_job(work, "data/*.csv")
    assert run_cli([]).exit_code == 0
    assert sorted(units(work, "c")["concat"]["fingerprint"]["inputs"]) == ["data/a.csv", "data/b.csv"]
    assert "skip  concat: done" in _plan(work)
    write(work / "data" / "a.csv", "A\n")
    assert "run   concat: input changed: data/a.csv" in _plan(work)
    assert run_cli([]).exit_code == 0
    write(work / "data" / "c.csv", "c\n")
    assert "run   concat: input added: data/c.csv" in _plan(work)
    assert run_cli([]).exit_code == 0
    (work / "data" / "b.csv").unlink()
    assert "run   concat: input removed: data/b.csv" in _plan(work)
    assert run_cli([]).exit_code == 0
    write(work / "data" / "notes.txt", "not a csv\n")
    assert "skip  concat: done" in _plan(work)
    assert (work / "trace").read_text().split() == ["run"] * 4


def test_a_directory_input_with_a_nested_file_edited(work: Path) -> None:
    (work / "data" / "sub").mkdir(parents=True)
    write(work / "data" / "top.txt", "1\n")
    write(work / "data" / "sub" / "deep.txt", "2\n")
    _concat_job(work, "data/")
    assert run_cli([]).exit_code == 0
    assert sorted(units(work, "c")["concat"]["fingerprint"]["inputs"]) == ["data/sub/deep.txt", "data/top.txt"]
    write(work / "data" / "sub" / "deep.txt", "22\n")
    assert "run   concat: input changed: data/sub/deep.txt" in _plan(work)
    assert run_cli([]).exit_code == 0
    (work / "data" / "sub" / "new").mkdir()
    write(work / "data" / "sub" / "new" / "x.txt", "x\n")
    assert "run   concat: input added: data/sub/new/x.txt" in _plan(work)


def test_a_missing_input_is_refused_with_its_line_before_anything_runs(work: Path) -> None:
    write(work / "resumable.toml", """[job]
name = "m"
[steps.first]
run = "touch ran"
[steps.concat]
run = "true"
inputs = ["data/typo.csv"]
[steps.glob]
run = "true"
inputs = ["data/*.csv"]
""")
    r = run_cli([])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    toml = "resumable.toml"
    assert lines[0] == (f"resumable: {toml}:7: [steps.concat] inputs: input not found: 'data/typo.csv' (no such"
                        " file or directory, and no step declares it as an artifact)")
    assert lines[1] == f"resumable: {toml}:10: [steps.glob] inputs: no file matches 'data/*.csv'"
    assert "2 problems in the job file" in lines[2]
    assert not (work / "ran").exists() and not (work / "runs").exists()


def test_an_input_another_step_makes_needs_that_step(work: Path) -> None:
    write(work / "resumable.toml", """[job]
name = "p"
[steps.use]
run = "cat out/made.txt out/deep/x.txt > used.txt"
inputs = ["out/made.txt", "out/"]
[steps.make]
run = "mkdir -p out/deep && echo hi > out/made.txt && echo x > out/deep/x.txt"
artifacts = ["out/made.txt", "out/deep/x.txt"]
[steps.globbed]
run = "true"
inputs = ["out/*.txt"]
""")
    job = load_job_file(work / "resumable.toml")
    assert job.step("use").needs == ("make",) and job.step("globbed").needs == ("make",)
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert (work / "used.txt").read_text() == "hi\nx\n"
    assert units(work, "p")["use"]["dependsOn"] == ["make"]
    assert "skip  use: done" in _plan(work)


def test_a_touched_input_with_the_same_content_is_not_rerun_and_its_stats_are_kept(work: Path) -> None:
    write(work / "in.txt", "same\n")
    write(work / "resumable.toml", '[steps.a]\nrun = "echo a >> trace"\ninputs = ["in.txt"]\n')
    assert run_cli([]).exit_code == 0
    before = units(work, work.name)["a"]["fingerprint"]["inputs"]["in.txt"]
    st = os.stat(work / "in.txt")
    os.utime(work / "in.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert "skip  a: done" in _plan(work)
    r = run_cli([])
    assert r.exit_code == 0 and (work / "trace").read_text() == "a\n"
    after = units(work, work.name)["a"]["fingerprint"]["inputs"]["in.txt"]
    assert after.split()[0] == before.split()[0]  # the same content hash
    assert after.split()[2] == str(st.st_mtime_ns + 5_000_000_000)  # the new mtime recorded


def test_a_file_whose_size_mtime_and_inode_are_unchanged_is_not_hashed_again(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 4096)
    step = Step(id="s", command="true", cwd=str(tmp_path), inputs=("big.bin",))
    first = fp.fingerprint(step)
    rec = first["inputs"]["big.bin"]
    assert rec.split()[0] == fp.sha256_file(str(big))
    # A stored hash that is not the file's: reused as long as the stats say it is the same file.
    forged = {**first, "inputs": {"big.bin": "0" * 64 + rec[64:]}}
    assert fp.fingerprint(step, forged)["inputs"]["big.bin"].startswith("0" * 64)
    assert fp.unchanged(step, forged)
    os.utime(big, ns=(0, 10**18))  # another mtime: hashed again, and the content tells
    assert fp.fingerprint_changes(step, forged) == ["input changed: big.bin"]
    assert fp.fingerprint_changes(step, fp.fingerprint(step)) == []


def test_an_older_dict_record_still_counts(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("v1")
    step = Step(id="s", command="true", cwd=str(tmp_path), inputs=("in.txt",))
    st = os.stat(tmp_path / "in.txt")
    old = {**fp.fingerprint(step), "inputs": {"in.txt": {"size": st.st_size, "mtimeNs": st.st_mtime_ns,
                                                          "sha256": fp.sha256_file(str(tmp_path / "in.txt"))}}}
    assert fp.unchanged(step, old) and fp.fingerprint_changes(step, old) == []


def test_producers_of_a_pattern() -> None:
    made = {"/w/out/a.txt": "one", "/w/out/deep/b.txt": "two", "/w/other.txt": "three"}
    assert inputs.producers("/w", "out/a.txt", made) == ["one"]
    assert inputs.producers("/w", "out", made) == ["one", "two"]
    assert inputs.producers("/w", "out/*.txt", made) == ["one"]
    assert inputs.producers("/w", "out/**/*.txt", made) == ["one", "two"]
    assert inputs.producers("/w", "*.csv", made) == []


def test_a_steps_own_artifacts_are_not_among_its_inputs(work: Path) -> None:
    """A directory (or glob) input that covers what the step itself makes: its outputs are not
    what it depends on, or every run would find an input added or changed."""
    (work / "out").mkdir()
    write(work / "out" / "part.txt", "p\n")
    write(work / "resumable.toml", """[job]
name = "own"
[steps.merge]
run = "cat out/part.txt > out/merged.txt; echo run >> trace"
inputs = ["out/", "out/*.txt"]
artifacts = ["out/merged.txt"]
""")
    assert run_cli([]).exit_code == 0
    assert list(units(work, "own")["merge"]["fingerprint"]["inputs"]) == ["out/part.txt"]
    assert "skip  merge: done" in _plan(work)
    assert run_cli([]).exit_code == 0
    assert (work / "trace").read_text() == "run\n"
