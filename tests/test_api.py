"""The Python API does what the CLI does: the runner, the status view, the resume recipe, the
report, each through `resumable.*` rather than a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

import resumable
from corehelpers import journal_of


def write_job(path: Path, fail: bool) -> Path:
    path.write_text(
        '[job]\nname = "apijob"\n'
        '[steps.a]\nrun = "echo a > a.txt"\nartifacts = ["a.txt"]\n'
        f'[steps.b]\nrun = "{"exit 3" if fail else "echo b"}"\nneeds = ["a"]\n',
        encoding="utf-8",
    )
    return path


def test_run_job_runs_resumes_and_records_an_equivalent_command(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    job = write_job(tmp_path / "job.toml", fail=True)
    assert resumable.run_job(job, state_dir=runs, quiet=True) == 1
    run = resumable.open_run("apijob", runs_dir=runs)
    assert run.doc["status"] == "needs_attention"
    assert run.doc["units"]["b"]["status"] == "failed"
    assert run.doc["launch"]["argv"] == ["resumable", "run", str(job), "--dir", str(runs), "--quiet"]
    recipe = run.resume_recipe()
    assert recipe["runnable"] is True and recipe["argv"][:2] == ["resumable", "run"]
    assert "b" in run.status_text()
    write_job(job, fail=False)
    assert resumable.run_job(job, state_dir=runs, quiet=True) == 0
    doc = run.refresh()
    assert doc["status"] == "done"
    # a was done and intact: it was skipped, not re-run.
    assert [a["n"] for a in doc["units"]["a"]["attempts"]] == [1]
    assert [a["status"] for a in doc["units"]["b"]["attempts"]] == ["failed", "done"]
    html = run.report_html()
    assert html.lower().startswith("<!doctype html>") and "apijob" in html


def test_run_job_with_seed_style_steps_and_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    steps = ["one:echo 1", "two:echo 2"]
    assert resumable.run_job(job="flags", steps=steps, state_dir="runs", dry_run=True) == 0
    assert not (tmp_path / "runs" / "flags.json").exists()  # a dry run writes nothing
    assert "never ran" in capsys.readouterr().out
    assert resumable.run_job(job="flags", steps=steps, state_dir="runs", timeout="10s", quiet=True) == 0
    assert resumable.open_run("flags", runs_dir="runs").doc["status"] == "done"


def test_run_job_bad_input_raises_the_commands_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(resumable.ResumableError) as err:
        resumable.run_job(tmp_path / "missing.toml")
    assert err.value.exit_code == 1 and "no job file" in str(err.value)
    with pytest.raises(resumable.ResumableError):
        resumable.run_job(job="x", steps=["a:true"], timeout="soon")
    with pytest.raises(resumable.ResumableError):
        resumable.run_job(job="x", steps=["a:true"], jobs=-1)


def test_values_nested_too_deep_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Every Python version reads what any other wrote: a value nesting deeper than the limit is
    refused at the API (3.13's JSON scanner would read 5,000 levels that 3.11's cannot)."""
    from resumable.core.model import MAX_NESTING

    run = resumable.open_run("r", runs_dir=tmp_path)
    run.init("t", units=["a"])
    before = journal_of(run).read_bytes()
    deep: object = 1
    for _ in range(MAX_NESTING):
        deep = [deep]
    with pytest.raises(resumable.InvalidInputError, match=f"deeper than {MAX_NESTING} levels"):
        run.item({"msg": "x", "nested": deep})
    with pytest.raises(resumable.InvalidInputError, match="deeper"):
        run.unit("a", "in_progress", fields={"f": deep})
    assert journal_of(run).read_bytes() == before
    ok = 1
    for _ in range(MAX_NESTING - 3):
        ok = [ok]  # type: ignore[assignment]
    ids = run.item({"msg": "x", "nested": ok})  # the event, the item and its key fit the limit
    assert resumable.read_doc(run.path)["openItems"][0]["id"] == ids[0]
