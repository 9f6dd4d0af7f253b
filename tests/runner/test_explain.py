"""The skip rule, one test per reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resumable.runner import fingerprint as fp
from resumable.runner.explain import decide, plan
from resumable.runner.jobfile import Job, Step


def _done(step: Step) -> dict[str, Any]:
    return {"status": "done", "fingerprint": fp.fingerprint(step),
            "artifacts": fp.artifact_records(step)}


def test_each_reason(tmp_path: Path) -> None:
    (tmp_path / "art").write_text("x")
    (tmp_path / "inp").write_text("x")
    s = Step(id="s", command="true", cwd=str(tmp_path), artifacts=("art",), inputs=("inp",))
    done = _done(s)
    assert decide(s, None, force=False, upstream_runs=[]).reason == "never ran"
    assert decide(s, {"status": "failed", "lastExitCode": 3}, force=False,
                  upstream_runs=[]).reason == "failed last time (exit code 3)"
    assert decide(s, {"status": "timeout"}, force=False, upstream_runs=[]).reason \
        == "timed out last time"
    assert decide(s, {"status": "interrupted"}, force=False, upstream_runs=[]).reason \
        == "interrupted last time"
    d = decide(s, done, force=False, upstream_runs=[])
    assert (d.run, d.reason) == (False, "done")
    d = decide(s, done, force=True, upstream_runs=[])
    assert (d.run, d.reason, d.invalidate) == (True, "forced", True)
    changed = Step(id="s", command="false", cwd=str(tmp_path), artifacts=("art",), inputs=("inp",))
    assert decide(changed, done, force=False, upstream_runs=[]).reason == "command changed"
    d = decide(s, done, force=False, upstream_runs=["up"])
    assert (d.reason, d.invalidate) == ("upstream re-runs: up", True)
    (tmp_path / "art").write_text("y")
    assert decide(s, done, force=False, upstream_runs=[]).reason == "artifact changed: art"
    (tmp_path / "art").unlink()
    assert decide(s, done, force=False, upstream_runs=[]).reason == "artifact missing: art"
    (tmp_path / "inp").write_text("changed")
    assert decide(s, done, force=False, upstream_runs=[]).reason == "input changed: inp"
    assert decide(s, "garbage", force=False, upstream_runs=[]).reason == "never ran"


def test_upstream_propagates_through_plan(tmp_path: Path) -> None:
    a = Step(id="a", command="x", cwd=str(tmp_path))
    b = Step(id="b", command="y", cwd=str(tmp_path), needs=("a",))
    c = Step(id="c", command="z", cwd=str(tmp_path), needs=("b",))
    job = Job("j", (a, b, c), "t")
    units = {"a": {"status": "failed", "lastExitCode": 1}, "b": _done(b), "c": _done(c)}
    p = plan(job, units, force=False)
    assert [p[s].reason for s in "abc"] == [
        "failed last time (exit code 1)", "upstream re-runs: a", "upstream re-runs: b"]
