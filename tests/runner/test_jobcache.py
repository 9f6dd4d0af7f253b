"""A job file is parsed once and read back from the runs directory's cache while its bytes are
unchanged (runner.jobcache, store.files.cache); what the cache holds is never trusted beyond what
it can prove."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runnerhelpers import run_cli, status_of, write

from resumable import store
from resumable.errors import InvalidInputError
from resumable.runner import jobcache
from resumable.runner.jobfile import Job, load_job_file

JOB = '[job]\nname = "cj"\n[steps.a]\nrun = "echo a"\n[steps.b]\nrun = ["true"]\nneeds = ["a"]\ntimeout = 5\n'


def _load(work: Path, job: Path) -> Job:
    runs = work / "runs"
    runs.mkdir(exist_ok=True)
    return jobcache.load(job, None, lambda base: store.open_backend(str(runs)))


def _cache_files(work: Path) -> list[Path]:
    d = work / "runs" / ".cache"
    return sorted(d.iterdir()) if d.is_dir() else []


def test_a_cached_job_is_the_parsed_job_and_an_edit_replaces_it(work: Path) -> None:
    job = write(work / "resumable.toml", JOB)
    first = _load(work, job)
    assert len(_cache_files(work)) == 1
    again = _load(work, job)
    assert again == first == load_job_file(job)  # the same steps, field by field
    write(job, JOB.replace('"echo a"', '"echo A"'))
    edited = _load(work, job)
    assert edited.steps[0].command == "echo A"
    assert len(_cache_files(work)) == 1  # one cache per job file: the edit replaced it


def test_a_corrupt_or_loose_or_planted_cache_is_not_read(work: Path, tmp_path: Path) -> None:
    job = write(work / "resumable.toml", JOB)
    expected = _load(work, job)
    (cached,) = _cache_files(work)
    data = cached.read_bytes()
    cached.write_bytes(data.replace(b"echo a", b"echo X"))  # checksum no longer holds
    assert _load(work, job) == expected
    assert cached.read_bytes() == data  # written again
    cached.chmod(0o666)  # writable by others: not read, replaced
    assert _load(work, job) == expected
    # A link planted as the cache directory is not followed: nothing is read or written there.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for f in _cache_files(work):
        f.unlink()
    (work / "runs" / ".cache").rmdir()
    (work / "runs" / ".cache").symlink_to(elsewhere)
    assert _load(work, job) == expected
    assert list(elsewhere.iterdir()) == []


def test_a_job_with_problems_is_never_cached(work: Path) -> None:
    job = write(work / "resumable.toml", JOB.replace('needs = ["a"]', 'needs = ["nope"]'))
    for _ in range(2):
        with pytest.raises(InvalidInputError, match="unknown step 'nope'"):
            _load(work, job)
    assert _cache_files(work) == []


def test_inputs_are_looked_up_every_time(work: Path) -> None:
    (work / "data").mkdir()
    write(work / "data" / "1.csv", "1")
    job = write(work / "resumable.toml", '[job]\nname = "ins"\n[steps.a]\nrun = "cat data/*.csv"\n'
                'inputs = ["data/*.csv"]\n')
    assert [f.name for f in _load(work, job).input_files["a"]] == ["data/1.csv"]
    write(work / "data" / "2.csv", "2")
    assert [f.name for f in _load(work, job).input_files["a"]] == ["data/1.csv", "data/2.csv"]


def test_runs_from_the_cache_skip_and_rerun_as_without_it(work: Path) -> None:
    write(work / "resumable.toml", JOB)
    assert run_cli([]).exit_code == 0
    assert run_cli([]).exit_code == 0  # parsed again: the first run had no runs directory yet
    assert _cache_files(work)
    r = run_cli(["--dry-run"])
    assert r.exit_code == 0 and "0 to run, 2 to skip" in r.output
    write(work / "resumable.toml", JOB.replace('"echo a"', '"echo changed"'))
    r = run_cli(["--dry-run"])
    assert "run   a: command changed" in r.output, r.output
    assert run_cli([]).exit_code == 0
    assert status_of(work, "cj") == {"a": "done", "b": "done"}
    assert os.environ["RESUMABLE_DIR"] == str(work / "runs")
