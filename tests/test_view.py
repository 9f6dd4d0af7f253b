"""Pure status rendering: what the default view, --units and --list lines contain."""

from __future__ import annotations

from typing import Any

import pytest

from resumable.view import status as view
from status_fixtures import T0, base_doc, big_doc, rich_doc, ts, unit

NOW = T0 + 3600.0


def text(doc: dict[str, Any], **kw: Any) -> str:
    kw.setdefault("file", "/runs/x.json")
    kw.setdefault("now", NOW)
    return "\n".join(view.plain(line) for line in view.render_status(doc, **kw))


def test_default_view_sections_in_seed_order() -> None:
    out = text(rich_doc(), here="/elsewhere")
    order = ["● RUNNING  build the thing", "started 2026-11-29T08:00:00Z",
             "updated 2026-11-29T08:10:00Z", "file     /runs/x.json", "phases", "units",
             "needs attention", "↺ merge-1", "open     3", "validation", "resume:"]
    positions = [out.index(s) for s in order]
    assert positions == sorted(positions)


def test_phases_canonical_first_then_document_order_current_marked() -> None:
    doc = base_doc(phases={"zeta": {"status": "pending"}, "test": {"status": "running"},
                           "build": {"status": "done"}, "alpha": {"status": "skipped"}},
                   currentPhase="test")
    line = view.plain(view.phase_line(doc) or [])
    assert line.index("build") < line.index("test") < line.index("zeta") < line.index("alpha")
    assert "[▶ test]" in line and "✓ build" in line


def test_progress_bar_and_counts() -> None:
    out = text(rich_doc())
    assert "2/10 done (20%)" in out
    for chip in ("running 1", "failed 1", "timeout 1", "blocked 1", "dep_blocked 1",
                 "pending 1", "malformed 2"):
        assert chip in out


def test_attention_details_note_attempts_exit_duration_log() -> None:
    out = text(rich_doc())
    line = next(x for x in out.splitlines() if "compile" in x and "failed" in x)
    for part in ("attempt 2", "exit 2", "35s", "log logs/compile.2.log", "compiler crashed"):
        assert part in line
    assert "waiting on compile" in next(x for x in out.splitlines() if " test " in x)
    running = next(x for x in out.splitlines() if "docs" in x)
    assert "running 51m 40s" in running  # now - attempt start (08:08:20 -> 09:00)
    assert "? broken   malformed unit (null)" in out  # ids padded to the longest shown


def test_reconciled_from_trailer_line() -> None:
    # The seed's note, verbatim (scripts grep for it).
    assert "↺ merge-1  reconciled-from-trailer:abc123def" in text(rich_doc())


def test_findings_first_ten_then_count_and_resolved() -> None:
    items = [{"at": ts(0), "id": f"f{i}", "issue": f"problem {i}"} for i in range(13)]
    out = text(base_doc(openItems=items, resolvedItems=[{"id": "x"}, {"id": "y"}]))
    assert "open     13   resolved 2" in out
    assert "f9  problem 9" in out and "f10" not in out
    assert "… and 3 more open findings" in out


def test_validation_and_result() -> None:
    out = text(base_doc(finalValidation={"status": "green", "at": ts(9), "note": "all ok"},
                        result={"shipped": True}))
    assert "validation green ✓  at 2026-11-29T08:00:09Z  — all ok" in out
    assert 'result   {"shipped": true}' in out
    assert "validation not recorded (required)" in text(base_doc(requireValidation=True))


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (base_doc(status="done", finishedAt=ts(60)), "✓ converged: nothing to resume"),
        (base_doc(status="aborted"), "✗ aborted: not resumable"),
        (base_doc(status="needs_attention", units={"a": unit("failed")},
                  launch={"kind": "resumable", "argv": ["resumable", "run", "j.toml"],
                          "cwd": "/w"}),
         "→ resume: resumable run j.toml   (skip 0 done · re-run 1 eligible · 0 dep-blocked)"),
        (base_doc(status="needs_attention", units={"a": unit("failed")}),
         "→ not runnable as a command (no-launch"),
        (base_doc(status="weird"), "nothing pending"),
    ],
)
def test_footer(doc: dict[str, Any], expected: str) -> None:
    assert expected in text(doc, here="/w").splitlines()[-1]


def test_live_run_footer_hedges() -> None:
    doc = base_doc(units={"a": unit("pending")},
                   launch={"kind": "resumable", "argv": ["resumable", "run"], "cwd": "/w"})
    assert "if its runner has stopped, resume: resumable run" in text(doc, here="/w")


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"units": None, "phases": None, "openItems": None, "status": None},
        {"units": [], "phases": [1], "openItems": "x", "resolvedItems": 3, "task": 5},
        {"units": {"a": None, "b": [], "c": {"status": None}, "d": {"status": "zany"},
                   "e": {"status": "failed", "attempts": [None, {"n": "x"}], "note": 3}},
         "phases": {"p": None}, "finalValidation": "green", "currentPhase": ["x"],
         "createdAt": "not a time", "pipeline": {"integrationRef": 5}},
    ],
)
def test_malformed_documents_render(doc: dict[str, Any]) -> None:
    out = text(doc)
    assert out.splitlines()[0]


def test_malformed_units_counted_not_crashing() -> None:
    out = text({"units": {"a": None, "b": "s", "c": {"status": "zany"}}})
    assert "malformed 2" in out and "unknown 1" in out


def test_branch_line() -> None:
    out = text(base_doc(pipeline={"integrationRef": "refs/heads/int/x", "targetRef": "main"}))
    assert "branch   int/x → main" in out


def test_detail_lines_are_capped_with_a_count() -> None:
    units = {f"u{i}": unit("failed") for i in range(50)}
    units.update({f"d{i}": unit("dep_blocked", dependsOn=["u0"]) for i in range(7)})
    out = text(base_doc(units=units), detail_limit=5)
    assert sum(1 for x in out.splitlines() if "  failed" in x) == 5
    assert "… and 52 more (failed 45, dep_blocked 7); list them with `resumable status run-a --units STATE`" in out


def test_render_units_state() -> None:
    doc = rich_doc()
    lines = [view.plain(x) for x in view.render_units(doc, "running", NOW)]
    assert len(lines) == 1 and "docs" in lines[0]
    assert [view.plain(x) for x in view.render_units(doc, "interrupted", NOW)] == [
        "no units are interrupted"]
    assert len(view.render_units(doc, "malformed", NOW)) == 2


def test_list_line_and_age() -> None:
    line = view.plain(view.list_line("run-rich.json", rich_doc(), None, NOW))
    assert line.startswith("● run-rich ")
    assert " test " in line and " 2/10 " in line and line.endswith("50m ago")
    assert view.plain(view.list_line("x.json", None, "boom", NOW)) == "! x.json (unreadable: boom)"
    assert view.fmt_age(ts(0), T0 + 5) == "5s ago"
    assert view.fmt_age(ts(0), T0 + 3 * 3600 + 120) == "3h 2m ago"
    assert view.fmt_age(ts(0), T0 + 50 * 3600) == "2d ago"
    assert view.fmt_age("nope", NOW) == "?"


def test_eta_only_while_live_and_after_progress() -> None:
    doc = base_doc(units={"a": unit("done"), "b": unit("pending")})
    assert "ETA ≈ 1h 00m" in text(doc, show_eta=True)  # one unit per hour so far
    assert "ETA" not in text(doc)


def test_hundred_thousand_units_stay_short() -> None:
    """Counts are aggregated and detail lines capped (its speed is measured by benchmarks/)."""
    doc = big_doc(100_000)
    lines = view.render_status(doc, file="/runs/big.json", now=NOW)
    assert len(lines) < 40
    out = "\n".join(view.plain(x) for x in lines)
    assert "80000/100000 done (80%)" in out
    assert "… and 9980 more (failed 4980, dep_blocked 5000)" in out


def test_a_running_step_never_shows_the_exit_code_of_the_attempt_before() -> None:
    killed = {"n": 1, "status": "interrupted", "startedAt": ts(0), "finishedAt": ts(5), "exitCode": 143}
    again = {"n": 2, "status": "running", "startedAt": ts(3590)}
    doc = base_doc(units={"s": unit("in_progress", attempts=[killed, again], lastExitCode=143)})
    [line] = [x for x in text(doc).splitlines() if "▶ s" in x]
    assert "attempt 2" in line and "running 10s" in line and "exit" not in line, line
    # A seed unit (no attempts) still shows the exit code it recorded, once it is not running.
    seed = base_doc(units={"s": unit("failed", lastExitCode=3)})
    assert "exit 3" in text(seed)
