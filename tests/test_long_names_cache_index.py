"""Names at the file system's limit (255 bytes a component) for the newer files: the job cache
(``<runs-dir>/.cache/job.<hash>``) and a large run's unit index (``S.index``). A name that fits
works, the cache and the index included; one that does not is refused in one line, with nothing
written."""

from __future__ import annotations

import os
from pathlib import Path

import resumable
from corehelpers import assert_error, cli, ok
from resumable.store.files.layout import MAX_STEM, NAME_MAX, files_for

UNITS = 600  # past the size whose snapshot is rewritten on every write: the index is kept
# The longest stem: ``.<stem>.journal.jsonl.tmp.<pid>``, the longest name a run's files take, fits.
LONGEST_STEM = MAX_STEM


def _job(name: str, steps: int = 2) -> str:
    return f'[job]\nname = "{name}"\n' + "".join(f'[steps.s{i}]\nrun = "true"\n' for i in range(steps))


def test_a_run_named_at_the_limit_keeps_its_unit_index(tmp_path: Path) -> None:
    runs = tmp_path / ("d" * NAME_MAX)  # a runs directory whose name is itself at the limit
    path = runs / f"{'y' * LONGEST_STEM}.json"
    run = resumable.open_run(path)
    run.init("long", units=[f"u{i}" for i in range(UNITS)])
    run.close()
    index = Path(files_for(path).index)
    assert index.exists() and len(index.name.encode()) <= NAME_MAX
    ok(cli("unit", str(path), "u7", "done"))
    assert "1/600 done" in ok(cli("status", str(path), "--no-color"))
    assert ok(cli("get", str(path), "--summary")).strip().startswith("{")
    assert len(f".{path.stem}.journal.jsonl.tmp.{4194304}".encode()) == NAME_MAX  # the longest pid


def test_a_run_named_past_the_limit_is_refused_before_an_index_or_anything_else(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for stem in ("y" * (LONGEST_STEM + 1), "y" * 300):
        assert_error(cli("init", str(runs / f"{stem}.json"), "--task", "t", "--units", "a,b"), 1, "too long")
    assert list(runs.iterdir()) == []


def test_the_job_cache_of_a_job_file_named_at_the_limit(tmp_path: Path) -> None:
    base = tmp_path / ("b" * NAME_MAX)  # the job file's directory, and the job file, at the limit
    base.mkdir()
    jobfile = base / ("j" * (NAME_MAX - len(".toml")) + ".toml")
    name = "r" * 128  # the longest run id
    jobfile.write_text(_job(name, steps=UNITS))
    runs = tmp_path / ("d" * NAME_MAX)
    assert ok(cli("run", str(jobfile), "-q", runs=runs)).strip() == f"{name}: done ({UNITS} done)"
    cached = [p for p in (runs / ".cache").iterdir() if p.name.startswith("job.")]
    assert len(cached) == 1
    assert Path(files_for(runs / f"{name}.json").index).exists()
    stamp = cached[0].stat().st_mtime_ns
    assert f"{UNITS} skipped" in ok(cli("run", str(jobfile), runs=runs))  # read from the cache
    assert cached[0].stat().st_mtime_ns == stamp


def test_a_job_named_past_the_limit_is_refused_without_a_cache(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (tmp_path / "long.toml").write_text(_job("r" * 300))
    assert_error(cli("run", "long.toml", cwd=tmp_path, runs=runs), 1, "bad job name")
    (tmp_path / "short.toml").write_text(_job("r"))
    assert_error(cli("run", "short.toml", "--job", "r" * 300, cwd=tmp_path, runs=runs), 1, "bad job name")
    assert_error(cli("run", "x" * 300, cwd=tmp_path, runs=runs), 1)  # a job file named past the limit
    assert not runs.exists() and not os.path.exists(tmp_path / ".resumable")
