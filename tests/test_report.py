"""`resumable report`: the timeline data, the self-contained page, and the page in a real browser."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from corehelpers import needs
from resumable.cli.report import report_command
from resumable.view import report
from resumable.view.report import build_html, timeline
from status_fixtures import (
    T0,
    attempt_count,
    big_doc,
    rich_doc,
    sample_run,
    tree_state,
    ts,
    unit,
    write_doc,
)

CHROMIUM = "/usr/bin/chromium"


def test_one_bar_per_attempt_and_one_for_a_seed_unit() -> None:
    doc = rich_doc()
    tl = timeline(doc, now=T0 + 3600)
    # fetch 1, compile 2, lint 1, docs 1 (open), merge-1 1 (no attempts: startedAt/finishedAt)
    assert len(tl["bars"]) == attempt_count(doc) == 6
    rows = [r[0] for r in tl["rows"]]
    assert len(rows) == len(doc["units"])
    compile_row = rows.index("compile")
    bars = [b for b in tl["bars"] if b[0] == compile_row]
    assert [(b[4], tl["outcomes"][b[3]], b[5], b[6]) for b in bars] == [
        (1, "failed", 2, 20.0), (2, "failed", 2, 35.0)]
    docs = next(b for b in tl["bars"] if b[0] == rows.index("docs"))
    assert docs[7] == 1 and tl["outcomes"][docs[3]] == "running"
    assert docs[2] == pytest.approx(tl["span"])  # an open attempt runs to now on a live run
    merge = next(b for b in tl["bars"] if b[0] == rows.index("merge-1"))
    assert (merge[1], merge[2]) == (10.0, 20.0) and tl["outcomes"][merge[3]] == "done"


def test_rows_in_gantt_order_failures_pinned_first_unstarted_last() -> None:
    tl = timeline(rich_doc(), now=T0 + 3600)
    rows = [r[0] for r in tl["rows"]]
    # What failed or timed out leads (what a reader opens the report for), then the Gantt order.
    assert rows[:4] == ["compile", "lint", "fetch", "merge-1"]
    assert [r[1] for r in tl["rows"][:2]] == ["failed", "timeout"]
    assert rows[-5:] == ["test", "package", "review", "broken", "stringy"]
    # Bars follow their rows.
    assert {tl["outcomes"][b[3]] for b in tl["bars"] if b[0] == 0} == {"failed"}


def attempts_of(*statuses: str) -> list[dict[str, object]]:
    return [{"n": i + 1, "status": st, "startedAt": ts(i * 10), "finishedAt": ts(i * 10 + 5)}
            for i, st in enumerate(statuses)]


def test_retries_are_counted_apart_from_re_runs() -> None:
    doc = rich_doc()
    doc["units"] = {"flaky": unit("done", attempts=attempts_of("failed", "done")),
                    "rerun": unit("done", attempts=attempts_of("done", "done", "done")),
                    "resumed": unit("done", attempts=attempts_of("failed", "done"))}

    def att(uid: str, n: int, status: str) -> dict[str, object]:
        return {"t": "unit", "unit": uid, "state": status, "attempt": {"n": n, "status": status}}

    history = [
        {"t": "init", "units": []}, {"t": "begin"},
        att("flaky", 1, "in_progress"), att("flaky", 1, "failed"),
        att("flaky", 2, "in_progress"), att("flaky", 2, "done"),  # the retry policy: a retry
        att("rerun", 1, "done"), att("resumed", 1, "failed"),
        {"t": "invalidate", "unit": "rerun", "reason": "re-run requested"}, {"t": "begin"},
        att("rerun", 2, "done"),  # after `resumable rerun`: a re-run
        att("resumed", 2, "done"),  # after a failure, in the next session (a resume): a re-run
        {"t": "invalidate", "unit": "rerun", "reason": "--force"}, att("rerun", 3, "done"),
    ]
    assert report.repeats(doc, history) == (1, 3)
    page = build_html(doc, now=T0 + 3600, history=history)
    assert '<div class="num">1</div><div class="lbl">retries</div>' in page
    assert '<div class="num">3</div><div class="lbl">re-runs</div>' in page
    # Without the history (a seed run, or only the document), an attempt after a failure is a retry.
    assert report.repeats(doc) == (2, 2)


def test_the_report_command_reads_the_history(tmp_path: Path) -> None:
    """A step retried by its retry policy, and a failed step run again by the next `resumable run`
    (a resume, in a new session): one retry and one re-run, though both follow a failure."""
    import resumable

    (tmp_path / "job.toml").write_text(
        '[job]\nname = "h"\n'
        '[steps.flaky]\nrun = "test -f tried || { touch tried; exit 1; }"\nretries = 1\nbackoff = 0.01\n'
        '[steps.fixed]\nrun = "test -f fixed"\nneeds = ["flaky"]\n')
    runs = tmp_path / ".resumable" / "runs"
    assert resumable.run_job(str(tmp_path / "job.toml"), quiet=True) == 1
    (tmp_path / "fixed").write_text("")
    assert resumable.run_job(str(tmp_path / "job.toml"), quiet=True) == 0
    r = CliRunner().invoke(report_command, ["--dir", str(runs), "h", "-o", "-"])
    assert r.exit_code == 0, r.stderr
    assert '<div class="num">1</div><div class="lbl">retries</div>' in r.stdout
    assert '<div class="num">1</div><div class="lbl">re-runs</div>' in r.stdout
    doc = resumable.open_run("h", runs_dir=runs).handle.read()
    assert report.after_a_failure(doc) and report.repeats(doc) == (2, 0)  # the document alone cannot tell


def test_control_characters_never_reach_the_page_raw() -> None:
    doc = rich_doc()
    doc["task"] = "bell\x07 and \x1b]0;title\x07 \u009b2J"
    doc["units"]["id\x1b[31m"] = unit("failed", note="note\x07", startedAt=ts(1), finishedAt=ts(2))
    doc["openItems"] = [{"id": "f\x1b", "issue": "esc \x1b[2J", "severity": "high\x07"}]
    doc["result"] = "done\x1b[0m"
    page = build_html(doc, now=T0 + 3600, file="/runs/\x1bx.json")
    raw = [c for c in page if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
    assert raw == []
    assert "bell\\x07" in page and "esc \\x1b[2J" in page  # shown, as the terminal shows them


def test_timeline_is_null_safe() -> None:
    for doc in ({}, {"units": None}, {"units": {"a": None, "b": {"attempts": "x"},
                                               "c": {"attempts": [None, {"startedAt": 5}]},
                                               "d": {"status": "done", "startedAt": "bad"}}}):
        tl = timeline(doc)
        assert tl["bars"] == []
        build_html(doc)


def test_page_is_self_contained_and_escaped() -> None:
    doc = rich_doc()
    doc["units"]["</script><script>alert(1)</script>"] = unit(
        "done", startedAt=ts(1), finishedAt=ts(2))
    doc["task"] = "<b>bold</b> & co"
    page = build_html(doc, now=T0 + 3600, file="/runs/x.json")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert page.count("</script>") == 2  # the data block and the code block, nothing injected
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in page
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    assert m is not None
    data = json.loads(m.group(1))
    assert len(data["bars"]) == 7
    assert 'data-bars="7"' in page


def test_page_shows_summary_and_open_findings() -> None:
    page = build_html(rich_doc(), now=T0 + 3600)
    assert "compile fails on arm64" in page and "flaky lint" in page
    assert "Open findings (3)" in page and "resolved 1" in page
    assert '<div class="num">10</div><div class="lbl">units</div>' in page
    assert '<div class="num">6</div><div class="lbl">attempts</div>' in page
    assert '<div class="num">1</div><div class="lbl">retries</div>' in page


def test_report_command_writes_the_file_and_never_touches_the_runs_dir(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_doc(runs, sample_run())
    before = tree_state(runs)
    out = tmp_path / "out" / "r.html"
    r = CliRunner().invoke(report_command, ["--dir", str(runs), "release", "-o", str(out)])
    assert r.exit_code == 1 and "no such directory" in r.stderr  # a missing parent is not created
    assert not out.parent.exists()
    out.parent.mkdir()
    r = CliRunner().invoke(report_command, ["--dir", str(runs), "release", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == str(out)
    assert out.read_text().startswith("<!doctype html>")
    assert tree_state(runs) == before
    assert not [p for p in out.parent.iterdir() if p.name != "r.html"]  # no temp file left


def test_report_default_name_and_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs"
    write_doc(runs, rich_doc("run-x"))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(report_command, ["--dir", str(runs)])
    assert r.exit_code == 0 and (tmp_path / "run-x.report.html").is_file()
    r = CliRunner().invoke(report_command, ["--dir", str(runs), "run-x", "-o", "-"])
    assert r.stdout.startswith("<!doctype html>")


def test_report_errors(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_doc(runs, rich_doc("run-x"))
    (runs / "bad.json").write_text("{")
    r = CliRunner().invoke(report_command, ["--dir", str(runs), "nope"])
    assert r.exit_code == 3 and r.stderr.startswith("resumable: no run matches")
    r = CliRunner().invoke(report_command, ["--dir", str(runs), "bad"])
    assert r.exit_code == 1 and r.stderr.startswith("resumable: ") and r.stderr.count("\n") == 1
    r = CliRunner().invoke(report_command, ["--dir", str(tmp_path / "none")])
    assert r.exit_code == 3


def test_large_run_page_stays_compact() -> None:
    doc = big_doc(100_000)
    page = build_html(doc)
    assert len(page) < 12_000_000
    assert f'data-bars="{attempt_count(doc)}"' in page


# ---- in a real browser --------------------------------------------------------------------------

def _dump_dom(tmp_path: Path, page: str, size: str = "1200,800") -> str:
    html_file = tmp_path / "report.html"
    html_file.write_text(page, encoding="utf-8")
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={size}",
         "--virtual-time-budget=5000", "--dump-dom", html_file.as_uri()],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _chart_attrs(dom: str) -> dict[str, str]:
    m = re.search(r'<div id="chart"([^>]*)>', dom)
    assert m is not None
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))


needs_chromium = needs(
    "chromium", ".ci/run installs it with apt-get install -y chromium"
)


@needs_chromium
def test_browser_renders_one_bar_per_attempt(tmp_path: Path) -> None:
    doc = sample_run()
    n = attempt_count(doc)
    assert n > len([u for u in doc["units"].values() if u.get("attempts")])  # retries exist
    dom = _dump_dom(tmp_path, build_html(doc, now=T0 + 3600))
    attrs = _chart_attrs(dom)
    assert attrs["bars"] == str(n)
    assert attrs["laid-out-bars"] == str(n)
    assert attrs["rendered-bars"] == str(n)
    bar_elements = re.findall(r'<div class="bar o(\d)[^"]*"[^>]*title="([^"]*)"', dom)
    assert len(bar_elements) == n
    # Hover text carries exit code and duration.
    assert all("exit code" in t and "duration" in t for _, t in bar_elements)
    outcomes = {report.OUTCOMES[int(o)] for o, _ in bar_elements}
    assert {"done", "failed", "timeout"} <= outcomes


@needs_chromium
def test_browser_virtualises_thousands_of_rows(tmp_path: Path) -> None:
    doc = big_doc(5_000)
    n = attempt_count(doc)
    attrs = _chart_attrs(_dump_dom(tmp_path, build_html(doc)))
    assert attrs["bars"] == attrs["laid-out-bars"] == str(n)
    rendered = int(attrs["rendered-bars"])
    assert 0 < rendered < 200  # only the rows in view (plus overscan) are in the DOM
    assert int(attrs["rendered-rows"]) < 100


def test_docs_screenshot_exists() -> None:
    png = Path(__file__).resolve().parent.parent / "docs" / "images" / "report.png"  # scripts/docs-pictures
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"



@needs_chromium
def test_browser_shows_every_bar_of_fast_steps_and_retries(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A real job of steps that take milliseconds, one retried twice, one failing after its retry:
    every attempt is a visible bar inside its track, none clipped at the run's last moment, the
    attempts keep their milliseconds and the axis fits the data."""
    from resumable import read_doc, run_job

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RESUMABLE_DIR", str(tmp_path / "runs"))
    steps = "".join(f'[steps.fast{i}]\nrun = "true"\n' for i in range(12))
    steps += ('[steps.flaky]\nrun = "test -f m2 || {{ test -f m1 && touch m2 || touch m1; exit 1; }}"\n'
              'retries = 2\nbackoff = "20ms"\n'
              '[steps.broken]\nrun = "exit 3"\nretries = 1\nbackoff = "10ms"\n'
              '[steps.last]\nrun = "true"\nneeds = ["flaky"]\n').replace("{{", "{").replace("}}", "}")
    (tmp_path / "fast.toml").write_text(steps)
    assert run_job("fast.toml", jobs=2, keep_going=True, quiet=True) == 1
    doc = read_doc(tmp_path / "runs" / "fast.json")
    n = attempt_count(doc)
    assert n == 12 + 3 + 2 + 1
    starts = [a["startedAt"] for u in doc["units"].values() for a in u["attempts"]]
    assert all(re.fullmatch(r".*T\d\d:\d\d:\d\d\.\d{3}Z", s) for s in starts)  # milliseconds kept
    tl = timeline(doc)
    assert tl["span"] < 10 and max(b[2] for b in tl["bars"]) == pytest.approx(tl["span"], abs=0.001)
    dom = _dump_dom(tmp_path, build_html(doc))
    attrs = _chart_attrs(dom)
    assert attrs["bars"] == attrs["laid-out-bars"] == attrs["rendered-bars"] == str(n)
    assert attrs["visible-bars"] == str(n)
    assert 3 <= int(attrs["ticks"]) <= 8
    axis = re.search(r'<div class="axis" id="axis">(.*?)</div>', dom)
    assert axis is not None
    ticks = re.findall(r'<span class="tick"[^>]*>\+([^<]*)</span>', axis.group(1))
    assert ticks[0] == "0s" and all(t.endswith("s") for t in ticks)
    page = dom.split('<script id="data"')[0]  # the drawn elements, not the code that draws them
    titles = re.findall(r'<div class="bar[^"]*"[^>]*title="([^"]*)"', page)
    assert len(titles) == n
    assert all(re.search(r"\d\d:\d\d:\d\d\.\d{3} → \d\d:\d\d:\d\d\.\d{3} UTC", t) for t in titles)
    assert all(re.search(r"duration (\d+ms|\d+\.\ds)", t) for t in titles)


@needs_chromium
def test_browser_keeps_a_bar_in_the_last_moment_inside_the_track(tmp_path: Path) -> None:
    doc = sample_run()
    # An attempt that starts and ends in the run's very last millisecond.
    last = max(a["finishedAt"] for u in doc["units"].values() for a in u.get("attempts", [])
               if a.get("finishedAt"))
    doc["units"]["late"] = unit("done", attempts=[{"n": 1, "status": "done", "startedAt": last,
                                                    "finishedAt": last, "exitCode": 0}])
    n = attempt_count(doc)
    attrs = _chart_attrs(_dump_dom(tmp_path, build_html(doc, now=T0 + 3600)))
    assert attrs["rendered-bars"] == attrs["visible-bars"] == str(n)
