"""How long a run ran: the sum of its runner sessions, in milliseconds, never the idle time between
invocations (status's `ran`, the report's card)."""

from __future__ import annotations

import calendar
import time
from pathlib import Path

from runnerhelpers import doc, run_cli, write

from resumable.core.events import apply
from resumable.view.status import plain, ran_seconds, render_status


def _ev(t: str, at: str, **kw: object) -> dict[str, object]:
    return {"t": t, "at": at, **kw}


def test_sessions_are_summed_without_the_idle_time_between_them() -> None:
    doc_, _ = apply(None, _ev("init", "2026-01-01T00:00:00Z", id="r", task="t", units=[]))
    apply(doc_, _ev("begin", "2026-01-01T00:00:00Z", clock="2026-01-01T00:00:00.100Z"))
    apply(doc_, _ev("finalize", "2026-01-01T00:00:00Z", status="needs_attention",
                    clock="2026-01-01T00:00:00.900Z"))
    assert doc_["ranSeconds"] == 0.8 and "sessionStartedAt" not in doc_
    # An hour later, a second session of two seconds.
    apply(doc_, _ev("begin", "2026-01-01T01:00:00Z", clock="2026-01-01T01:00:00.000Z"))
    assert doc_["status"] == "running" and doc_["sessionStartedAt"] == "2026-01-01T01:00:00.000Z"
    apply(doc_, _ev("finalize", "2026-01-01T01:00:02Z", status="done"))
    assert doc_["ranSeconds"] == 2.8
    lines = [plain(line) for line in render_status(doc_, file="f", now=0.0)]
    assert any(" · ran 2.8s" in line for line in lines)


def test_a_session_that_never_finished_counts_to_its_last_write() -> None:
    doc_, _ = apply(None, _ev("init", "2026-01-01T00:00:00Z", id="r", task="t", units=["a"]))
    apply(doc_, _ev("begin", "2026-01-01T00:00:00Z", clock="2026-01-01T00:00:00.000Z"))
    apply(doc_, _ev("unit", "2026-01-01T00:00:03Z", unit="a", state="in_progress"))
    # The runner was killed; the next one begins a day later.
    apply(doc_, _ev("begin", "2026-01-02T00:00:00Z", clock="2026-01-02T00:00:00.000Z"))
    assert doc_["ranSeconds"] == 3.0
    now = calendar.timegm((2026, 1, 2, 0, 0, 5, 0, 0, 0))
    line = plain(render_status(doc_, file="f", now=now)[1])
    assert "running for 5.0s (ran 3.0s before)" in line
    assert ran_seconds(doc_, now) == 8.0


def test_a_short_run_shows_its_time_and_a_rerun_adds_only_its_own(work: Path) -> None:
    write(work / "resumable.toml", '[steps.a]\nrun = "sleep 0.5"\n')
    assert run_cli([]).exit_code == 0
    first = doc(work, work.name)["ranSeconds"]
    assert 0.5 <= first < 5
    time.sleep(1.0)  # idle between invocations: not counted
    before = (work / "runs" / f"{work.name}.journal.jsonl").read_bytes()
    r = run_cli([])
    assert r.exit_code == 0 and r.output.endswith(f"{work.name}: done (1 skipped)\n")
    # Nothing to do: nothing written, as make.
    assert (work / "runs" / f"{work.name}.journal.jsonl").read_bytes() == before
    write(work / "resumable.toml", '[steps.a]\nrun = "sleep 0.5"\n[steps.b]\nrun = "sleep 0.2"\n')
    assert run_cli([]).exit_code == 0
    second = doc(work, work.name)["ranSeconds"]
    assert first + 0.2 <= second < first + 1.0
    r = run_cli(["--status"])
    assert f"ran {second:.1f}s" in r.output
