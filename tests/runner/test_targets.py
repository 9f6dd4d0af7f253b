"""`resumable run [JOBFILE] STEP...`: the targets and everything they need, nothing else; the
other steps keep their state; --dry-run and --explain speak of the same selection."""

from __future__ import annotations

from pathlib import Path

from runnerhelpers import doc, run_cli, status_of, units, write

from corehelpers import DIAMOND
from resumable.api import run_job


def _trace(work: Path) -> list[str]:
    path = work / "trace"
    return path.read_text().split() if path.exists() else []


def test_a_target_with_a_diamond_of_needs_runs_it_and_what_it_needs_only(work: Path) -> None:
    write(work / "resumable.toml", DIAMOND)
    r = run_cli(["--dry-run", "d"])
    assert r.exit_code == 0
    assert [ln.split()[1].rstrip(":") for ln in r.output.splitlines()[:-1]] == ["a", "b", "c", "d"]
    assert r.output.splitlines()[-1] == "4 to run, 0 to skip, 2 not selected (dry run: nothing executed or written)"
    assert run_cli(["--explain", "other", "d"]).output.strip() == "skip  other: not selected (not needed by d)"
    assert not (work / "runs").exists() or "d" not in [p.stem for p in (work / "runs").glob("*.json")]

    r = run_cli(["d"])
    assert r.exit_code == 0, r.output
    trace = _trace(work)
    assert trace[0] == "a" and sorted(trace[1:3]) == ["b", "c"] and trace[3:] == ["d"]
    assert status_of(work, "d") == {"a": "done", "b": "done", "c": "done", "d": "done", "other": "pending",
                                    "after": "pending"}
    assert "d: done (4 done, 2 not selected)" in r.output and "resume with" not in r.output
    assert doc(work, "d")["status"] == "needs_attention"  # the run as a whole is not done
    assert "skip  d: done" in run_cli(["--dry-run", "d"]).output

    # The rest, later: only what is not done runs, and the run is done.
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert _trace(work)[4:] == ["other", "after"]
    assert doc(work, "d")["status"] == "done"


def test_steps_not_selected_keep_their_state(work: Path) -> None:
    write(work / "jobs.toml", DIAMOND.replace('echo other >> trace', 'exit 3'))
    assert run_cli(["jobs.toml", "other"]).exit_code == 1
    before = units(work, "d")["other"]
    assert before["status"] == "failed"
    r = run_cli(["jobs.toml", "b", "c"])  # two targets, and the job file named first
    assert r.exit_code == 0, r.output
    assert units(work, "d")["other"] == before
    assert status_of(work, "d")["d"] == "pending" and status_of(work, "d")["b"] == "done"
    # The resume line replays the same targets.
    assert doc(work, "d")["launch"]["argv"] == ["resumable", "run", "jobs.toml", "b", "c"]


def test_an_unknown_target_is_refused_with_the_closest_id(work: Path) -> None:
    write(work / "resumable.toml", DIAMOND.replace("[steps.d]", "[steps.combine]").replace('["d"]', '["combine"]'))
    r = run_cli(["combin"])
    assert r.exit_code == 1
    assert "job 'd' has no step 'combin' (did you mean 'combine'?)" in r.output
    assert not (work / "trace").exists() and not (work / "runs" / "d.json").exists()


def test_targets_from_the_python_api(work: Path) -> None:
    write(work / "resumable.toml", DIAMOND)
    assert run_job(targets=["b"]) == 0
    assert _trace(work) == ["a", "b"]
