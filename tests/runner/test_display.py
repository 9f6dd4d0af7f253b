"""What the runner prints: relative log paths, one line for skipped steps, a bar coloured by outcome,
an ETA kept in running sums."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from resumable.runner.display import LiveReporter, PlainReporter, fmt_duration, show_path
from resumable.runner.explain import Decision
from resumable.runner.jobfile import Job, Step

STEPS = tuple(Step(id=f"s{i}", command="true", cwd="/") for i in range(4))
JOB = Job("j", STEPS, "test")


def _decisions(skipped: int) -> dict[str, Decision]:
    return {s.id: Decision(s.id, i >= skipped, "done" if i < skipped else "never ran")
            for i, s in enumerate(STEPS)}


def test_plain_summarises_skipped_steps_unless_verbose() -> None:
    out = io.StringIO()
    PlainReporter(out).start(JOB, _decisions(3), {})
    assert out.getvalue() == "skip   3 steps already done (-v lists them)\n"
    out = io.StringIO()
    PlainReporter(out, verbose=True).start(JOB, _decisions(3), {})
    assert out.getvalue() == "skip   s0 (done)\nskip   s1 (done)\nskip   s2 (done)\n"
    out = io.StringIO()
    PlainReporter(out).start(JOB, _decisions(4), {})
    assert out.getvalue() == "skip   all 4 steps already done (-v lists them)\n"
    out = io.StringIO()
    PlainReporter(out, quiet=True).start(JOB, _decisions(3), {})
    assert out.getvalue() == ""


def test_log_paths_are_relative_to_the_current_directory(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    log = str(tmp_path / ".resumable" / "runs" / "j" / "logs" / "s0.1.log")
    assert show_path(log) == os.path.join(".resumable", "runs", "j", "logs", "s0.1.log")
    assert show_path("/elsewhere/x.log") == "/elsewhere/x.log"  # ../../.. would be longer
    out = io.StringIO()
    PlainReporter(out).step_finished(STEPS[0], 1, "done", 0.008, 0, log, None)
    assert out.getvalue() == "done   s0 (8ms; log .resumable/runs/j/logs/s0.1.log)\n"


def test_durations() -> None:
    # Below a second in milliseconds; from there on core.stamps' one format.
    assert [fmt_duration(s) for s in (0.0084, 0.5, 1.25, 75, 4000)] == ["8ms", "500ms", "1.2s", "1m 15s",
                                                                        "1h 06m"]


def test_live_bar_is_green_until_a_step_fails_and_the_eta_uses_sums() -> None:
    out = io.StringIO()
    rep = LiveReporter(out)
    rep.start(JOB, _decisions(1), {"s1": 2.0, "s2": 4.0})
    try:
        assert (rep.est_sum, rep.est_n) == (6.0, 2)
        bar = rep._render().renderables[0].columns[0]._cells[0]
        assert bar.complete_style == "green"
        rep.step_started(STEPS[1], 1)
        rep.step_finished(STEPS[1], 1, "done", 3.0, 0, "/l", None)
        assert (rep.est_sum, rep.est_n, len(rep.remaining)) == (4.0, 1, 2)
        rep.step_finished(STEPS[3], 1, "failed", 1.0, 2, "/l", 1.0)  # will retry: still remaining
        assert (rep.est_sum, rep.est_n, len(rep.remaining)) == (5.0, 2, 2)
        bar = rep._render().renderables[0].columns[0]._cells[0]
        assert bar.complete_style == "green"  # a retry is not a failure yet
        rep.step_finished(STEPS[3], 2, "failed", 1.0, 2, "/l", None)
        assert (rep.est_sum, rep.est_n, len(rep.remaining)) == (4.0, 1, 1)
        bar = rep._render().renderables[0].columns[0]._cells[0]
        assert bar.complete_style == "red"
    finally:
        rep.close()


FAMILY = tuple(Step(id=f"clean+{i:02d}", command="true", cwd="/") for i in range(1, 9))
FJOB = Job("f", (*FAMILY, Step(id="merge", command="true", cwd="/")), "test")


def _plain_text(line: object) -> str:
    return str(getattr(line, "plain", line))


def test_the_live_view_shows_a_family_as_a_line_with_its_running_instances() -> None:
    out = io.StringIO()
    rep = LiveReporter(out)
    decisions = {s.id: Decision(s.id, i >= 3, "done" if i < 3 else "never ran") for i, s in enumerate(FJOB.steps)}
    rep.start(FJOB, decisions, {})
    try:
        rep.step_started(FAMILY[3], 1)
        rep.step_started(FAMILY[4], 1)
        rep.step_finished(FAMILY[5], 1, "done", 0.1, 0, "/l", None)
        lines = [_plain_text(r) for r in rep._render().renderables[1:]]
        assert lines[0] == "  clean: 4/8 done, 2 running"
        assert lines[1].startswith("    running clean+04 (attempt 1)")
        assert lines[2].startswith("    running clean+05 (attempt 1)")
        for s in (FAMILY[3], FAMILY[4], FAMILY[6]):
            rep.step_finished(s, 1, "done", 0.1, 0, "/l", None)
        rep.step_finished(FAMILY[7], 1, "failed", 0.1, 1, "/l", None)
        assert "clean: 5 of 8 instances ended (4 done, 1 failed)" in out.getvalue()
    finally:
        rep.close()


def test_the_plain_view_groups_a_familys_reruns_and_says_when_it_ended() -> None:
    out = io.StringIO()
    rep = PlainReporter(out)
    decisions = {s.id: Decision(s.id, s.id in ("clean+02", "merge"), "input changed: raw/02.csv"
                                if s.id == "clean+02" else "upstream re-runs: clean+02" if s.id == "merge" else "done")
                 for s in FJOB.steps}
    rep.start(FJOB, decisions, {})
    rep.step_finished(FAMILY[1], 1, "done", 0.1, 0, "/l", None)
    assert out.getvalue().splitlines() == [
        "rerun  clean: 1 of 8 instances (clean+02: input changed: raw/02.csv); 7 skip (done)",
        "rerun  merge (upstream re-runs: clean+02)",
        "skip   7 steps already done (-v lists them)",
        "done   clean+02 (100ms; log /l)",
        "clean: 1 of 8 instances ended (1 done)",
    ]
