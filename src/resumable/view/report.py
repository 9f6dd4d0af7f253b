"""`resumable report`: a run as one self-contained HTML page (a Gantt timeline of every attempt).

The page needs no network: CSS, JS and the data are inline. The data is compact arrays, not
markup, and the JS draws only the rows in view once a run has more than ``VIRTUALISE_ABOVE``
units, so a 100,000-attempt run stays a few MB and scrolls smoothly.

The chart element carries ``data-bars`` (attempt bars in the data, counted here) and, once the JS
ran, ``data-laid-out-bars`` (bars it placed on the time axis) and ``data-rendered-bars`` (bar
elements currently in the DOM): a headless browser test compares them.
"""

from __future__ import annotations

import html
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import click

from resumable.errors import CorruptRunError, NoRunError, StoreError
from resumable.view import discovery
from resumable.view import status as view
from resumable.view.watch import ReaderCommand

VIRTUALISE_ABOVE: Final = 800  # rows; below this every row is in the DOM (hover works anywhere)
OUTCOMES: Final = ("done", "failed", "timeout", "interrupted", "running", "blocked", "other")
_ATTEMPT_OUTCOME: Final = {
    "done": "done", "failed": "failed", "timeout": "timeout", "interrupted": "interrupted",
    "running": "running", "in_progress": "running", "blocked": "blocked",
    "dep_blocked": "blocked",
}


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def timeline(doc: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """Rows (one per unit) and bars (one per attempt) as compact arrays, times relative to t0.

    A bar is ``[row, start, end, outcome index, attempt n, exit code | null, duration | null,
    open]``; ``open`` marks an attempt without finishedAt, drawn up to the run's end (or now)."""
    units = doc.get("units")
    units = units if isinstance(units, dict) else {}
    raw: list[tuple[int, float, float | None, str, int, int | None, float | None]] = []
    rows: list[list[Any]] = []
    first_start: list[float] = []
    for uid, unit in units.items():
        row = len(rows)
        bucket = view.unit_bucket(unit)
        rows.append([str(uid), bucket])
        earliest = float("inf")
        attempts = unit.get("attempts") if isinstance(unit, dict) else None
        spans: list[tuple[float, float | None, str, int, int | None, float | None]] = []
        if isinstance(attempts, list) and attempts:
            for i, a in enumerate(attempts):
                if not isinstance(a, dict):
                    continue
                start = view.parse_ts(a.get("startedAt"))
                if start is None:
                    continue
                end = view.parse_ts(a.get("finishedAt"))
                dur = _num(a.get("duration"))
                if end is None and dur is not None:
                    end = start + dur
                st = a.get("status")
                outcome = _ATTEMPT_OUTCOME.get(st if isinstance(st, str) else "", "other")
                n = a.get("n")
                code = a.get("exitCode")
                spans.append((start, end, outcome, n if isinstance(n, int) else i + 1,
                              code if isinstance(code, int) and not isinstance(code, bool)
                              else None, dur))
        elif isinstance(unit, dict):
            # A seed unit has no attempts, only its own start/finish: one bar for its one run.
            start = view.parse_ts(unit.get("startedAt"))
            if start is not None:
                end = view.parse_ts(unit.get("finishedAt"))
                outcome = _ATTEMPT_OUTCOME.get(bucket, "other")
                code = unit.get("lastExitCode")
                spans.append((start, end, outcome, 1,
                              code if isinstance(code, int) and not isinstance(code, bool)
                              else None, None))
        for s in spans:
            raw.append((row, *s))
            earliest = min(earliest, s[0])
        first_start.append(earliest)

    starts = [b[1] for b in raw]
    ends = [b[2] for b in raw if b[2] is not None]
    run_end = view.parse_ts(doc.get("finishedAt"))
    if run_end is None:
        run_end = view.parse_ts(doc.get("updatedAt"))
        if now is not None and doc.get("status") in view.LIVE:
            run_end = max(run_end or now, now)
    t0 = min(starts) if starts else (view.parse_ts(doc.get("createdAt")) or 0.0)
    t1 = max([t0, *ends, *([run_end] if run_end is not None else [])])
    if raw and run_end is None:
        t1 = max(t1, max(starts))
    bars: list[list[Any]] = []
    for row, start, end, outcome, n, code, dur in raw:
        is_open = end is None
        stop = t1 if end is None else max(end, start)
        if dur is None and not is_open:
            dur = stop - start
        bars.append([row, round(start - t0, 3), round(stop - t0, 3), OUTCOMES.index(outcome), n,
                     code, None if dur is None else round(dur, 3), 1 if is_open else 0])
    # Gantt order: units by first start, never-started units last in document order.
    order = sorted(range(len(rows)), key=lambda r: (first_start[r], r))
    position = {old: new for new, old in enumerate(order)}
    rows = [rows[r] for r in order]
    for b in bars:
        b[0] = position[b[0]]
    return {"t0": t0, "span": max(t1 - t0, 1.0), "rows": rows, "bars": bars,
            "outcomes": list(OUTCOMES)}


def summary_numbers(doc: Mapping[str, Any], tl: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(label, value, css class) cards for the header."""
    t = view.tally(doc, keep=0)
    bars = tl["bars"]
    units_with_bars = len({b[0] for b in bars})
    retries = len(bars) - units_with_bars
    created = view.parse_ts(doc.get("createdAt"))
    end = view.parse_ts(doc.get("finishedAt")) or view.parse_ts(doc.get("updatedAt"))
    wall = view.fmt_dur(end - created) if created is not None and end is not None else "—"
    cards = [("units", str(t.total), ""), ("done", str(t.done), "done")]
    for b in ("failed", "timeout", "in_progress", "blocked", "dep_blocked", "pending",
              "interrupted", "malformed"):
        n = t.counts.get(b, 0)
        if n or b in ("failed", "timeout", "pending"):
            cards.append(("running" if b == "in_progress" else b.replace("_", " "), str(n),
                          b if n else "zero"))
    cards += [("attempts", str(len(bars)), ""), ("retries", str(retries), ""),
              ("wall time", wall, "")]
    return cards


def _item_html(item: object) -> str:
    line = view.finding_line(item)
    sev = ""
    parts: list[str] = []
    for text, style in line[1:]:
        if text.startswith("[") and text.rstrip().endswith("]"):
            sev = text.strip()[1:-1]
        elif style == "bold":
            parts.append(f"<b>{html.escape(text)}</b>")
        else:
            parts.append(html.escape(text))
    badge = f'<span class="sev sev-{html.escape(sev)}">{html.escape(sev)}</span> ' if sev else ""
    return f"<li>{badge}{''.join(parts)}</li>"


def _script_json(value: object) -> str:
    # Inside <script> a "</script>" or "<!--" in a unit id or note would end the element early.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


def build_html(doc: Mapping[str, Any], *, now: float | None = None, file: str = "") -> str:
    """The whole report page as one string."""
    tl = timeline(doc, now)
    status = doc.get("status")
    glyph, label, _ = view.STATUS_STYLE.get(status if isinstance(status, str) else "",
                                             ("?", str(status).upper(), ""))
    task = doc.get("task")
    run_id = doc.get("id")
    cards = "".join(
        f'<div class="card {html.escape(cls)}"><div class="num">{html.escape(v)}</div>'
        f'<div class="lbl">{html.escape(k)}</div></div>'
        for k, v, cls in summary_numbers(doc, tl)
    )
    open_items = doc.get("openItems")
    open_list = open_items if isinstance(open_items, list) else []
    resolved = doc.get("resolvedItems")
    n_resolved = len(resolved) if isinstance(resolved, list) else 0
    findings = "".join(_item_html(i) for i in open_list) or '<li class="none">none</li>'
    fv = doc.get("finalValidation")
    if isinstance(fv, dict) and fv.get("status") in ("green", "red"):
        note = f" — {fv.get('note')}" if isinstance(fv.get("note"), str) else ""
        validation = (f'<span class="val val-{fv["status"]}">{fv["status"]}</span>'
                      f"{html.escape(note)}")
    else:
        validation = '<span class="muted">not recorded</span>'
    result = doc.get("result")
    result_html = ("" if result is None else
                   f"<p><b>result</b> <code>{html.escape(view.one_line(result, 500))}</code></p>")
    phases = view.phase_line(doc)
    phase_html = ""
    if phases:
        phase_html = " · phases " + html.escape(view.plain(phases[1:]))
    legend = "".join(
        f'<span class="lg"><i class="o{i}"></i>{o}</span>' for i, o in enumerate(OUTCOMES)
        if any(b[3] == i for b in tl["bars"]) or o in ("done", "failed", "timeout")
    )
    meta = " · ".join(
        html.escape(s) for s in (
            f"id {run_id}", f"started {doc.get('createdAt') or '?'}",
            f"updated {doc.get('updatedAt') or '?'}",
            *([f"finished {doc['finishedAt']}"] if doc.get("finishedAt") else []),
        )
    )
    page = _TEMPLATE
    for key, value in (
        ("TITLE", html.escape(f"{run_id} — resumable report")),
        ("BADGE", f'<span class="badge st-{html.escape(str(status))}">'
                  f"{html.escape(glyph)} {html.escape(label)}</span>"),
        ("TASK", html.escape(str(task) if task is not None else "(no task)")),
        ("META", meta),
        ("FILE", html.escape(file)),
        ("PHASES", phase_html),
        ("CARDS", cards),
        ("LEGEND", legend),
        ("NBARS", str(len(tl["bars"]))),
        ("NROWS", str(len(tl["rows"]))),
        ("VIRT", str(VIRTUALISE_ABOVE)),
        ("NOPEN", str(len(open_list))),
        ("NRESOLVED", str(n_resolved)),
        ("FINDINGS", findings),
        ("VALIDATION", validation),
        ("RESULT", result_html),
        ("DATA", _script_json(tl)),
        ("GENERATED", html.escape(time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                time.gmtime(now if now is not None else 0)))
         if now is not None else ""),
    ):
        page = page.replace("{{" + key + "}}", value)
    return page


def _write_atomic(path: Path, text: str) -> None:
    # A browser tab refreshing the report must never see half a page.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@click.command("report", cls=ReaderCommand, short_help="Write a run's timeline as one HTML file.")
@click.argument("run", required=False)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Where to write the HTML (default ./<run-id>.report.html; '-' for stdout).")
@click.option("--dir", "runs_dir", type=click.Path(file_okay=False), default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
def report_command(run: str | None, output: str | None, runs_dir: str | None) -> None:
    """Write a run's timeline (every attempt of every unit), summary and findings as one
    self-contained HTML file (RUN: an id, an id prefix or a .json path; default the newest)."""
    rdir = discovery.find_runs_dir(runs_dir)
    entry = discovery.pick_run(rdir, run)
    if entry is None:
        raise NoRunError(f"no runs under {rdir}: nothing to report")
    if entry.doc is None:
        raise CorruptRunError(entry.error or f"cannot read {entry.path}")
    page = build_html(entry.doc, now=time.time(), file=str(entry.path))
    if output == "-":
        click.echo(page, nl=False)
        return
    target = Path(output) if output else Path(f"{entry.run_id}.report.html")
    try:
        _write_atomic(target, page)
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
    click.echo(str(target))


_TEMPLATE: Final = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{TITLE}}</title>
<style>
:root{--bg:#f7f8fa;--fg:#1d2330;--muted:#6b7280;--line:#e3e6eb;--card:#fff;
--o0:#2f9e5b;--o1:#d64545;--o2:#e8913a;--o3:#8a63d2;--o4:#3b82f6;--o5:#c9a227;--o6:#9aa1ab}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
background:var(--bg);color:var(--fg)}
main{max-width:1400px;margin:0 auto;padding:18px 24px 40px}
header h1{font-size:20px;margin:0 0 4px;display:flex;gap:12px;align-items:center}
.badge{font-size:12px;font-weight:700;padding:3px 9px;border-radius:999px;color:#fff;
background:#6b7280;letter-spacing:.03em;white-space:nowrap}
.st-running,.st-initializing{background:#3b82f6}.st-done{background:#2f9e5b}
.st-needs_attention{background:#d98a00}.st-aborted{background:#d64545}
.meta,.muted,.phases{color:var(--muted);margin:2px 0;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:6px 12px;
flex:1 1 0;min-width:84px}
.card .num{font-size:20px;font-weight:700;white-space:nowrap;line-height:1.2}
.card .lbl{color:var(--muted);font-size:12px}
.card.done .num{color:var(--o0)}.card.failed .num{color:var(--o1)}
.card.timeout .num{color:var(--o2)}.card.zero .num{color:#b4b9c2}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px;
margin:14px 0}
h2{font-size:15px;margin:0 0 8px;display:flex;justify-content:space-between;align-items:baseline}
.legend{font-size:12px;color:var(--muted);font-weight:400}
.lg{margin-left:12px;white-space:nowrap}.lg i{display:inline-block;width:10px;height:10px;
border-radius:2px;margin-right:4px;vertical-align:-1px}
.o0{background:var(--o0)}.o1{background:var(--o1)}.o2{background:var(--o2)}
.o3{background:var(--o3)}.o4{background:var(--o4)}.o5{background:var(--o5)}
.o6{background:var(--o6)}
#chart{--label:190px;position:relative}
.axis{position:relative;height:22px;margin-left:var(--label);border-bottom:1px solid var(--line);
font-size:11px;color:var(--muted)}
.tick{position:absolute;top:3px;transform:translateX(-50%);white-space:nowrap}
#viewport{overflow-y:auto;overflow-x:hidden;position:relative;max-height:58vh}
#canvas{position:relative}
.grid{position:absolute;top:0;bottom:0;width:1px;background:#f0f1f4}
.row{position:absolute;left:0;right:0;height:19px;display:flex;align-items:center}
.row.alt{background:rgba(20,30,60,.025)}.row:hover{background:rgba(59,130,246,.09)}
.label{width:var(--label);flex:none;padding:0 8px 0 2px;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.label .s{display:inline-block;width:8px;height:8px;border-radius:50%;margin-right:6px}
.track{position:relative;flex:1;height:100%}
.bar{position:absolute;top:3px;height:13px;border-radius:3px;min-width:3px;cursor:default;
box-shadow:inset 0 0 0 1px rgba(0,0,0,.08)}
.bar.open{background-image:repeating-linear-gradient(45deg,rgba(255,255,255,.35) 0 4px,
transparent 4px 8px)}
.bar:hover{outline:2px solid #1d2330;z-index:2}
#tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;font-size:12px;
padding:6px 8px;border-radius:6px;white-space:pre;display:none;z-index:10;
box-shadow:0 4px 14px rgba(0,0,0,.2)}
ul.findings{margin:0;padding-left:18px}ul.findings li{margin:3px 0}
.none{color:var(--muted);list-style:none;margin-left:-18px}
.sev{font-size:11px;font-weight:700;padding:1px 6px;border-radius:4px;background:#fde68a;
color:#7a4b00}.sev-blocker,.sev-critical,.sev-high{background:#fecaca;color:#8a1c1c}
.val{font-weight:700;padding:1px 8px;border-radius:4px;color:#fff}
.val-green{background:var(--o0)}.val-red{background:var(--o1)}
.cols{display:grid;grid-template-columns:2fr 1fr;gap:14px}
.cols section{margin:0}
footer{color:var(--muted);font-size:12px;margin-top:10px}
</style></head>
<body><main>
<header>
<h1>{{BADGE}}<span>{{TASK}}</span></h1>
<p class="meta">{{META}}</p>
<p class="meta">{{FILE}}{{PHASES}}</p>
</header>
<div class="cards">{{CARDS}}</div>
<section>
<h2>Timeline <span class="legend">{{LEGEND}}</span></h2>
<div id="chart" data-bars="{{NBARS}}" data-rows="{{NROWS}}" data-virtualise-above="{{VIRT}}">
<div class="axis" id="axis"></div>
<div id="viewport"><div id="canvas"></div></div>
</div>
<noscript><p class="muted">The timeline needs JavaScript.</p></noscript>
</section>
<div class="cols">
<section><h2>Open findings ({{NOPEN}}) <span class="legend">resolved {{NRESOLVED}}</span></h2>
<ul class="findings">{{FINDINGS}}</ul></section>
<section><h2>Final validation</h2><p>{{VALIDATION}}</p>{{RESULT}}</section>
</div>
<footer>resumable report · {{GENERATED}} · one row per unit, one bar per attempt;
hover a bar for its exit code and duration.</footer>
</main>
<div id="tip"></div>
<script id="data" type="application/json">{{DATA}}</script>
<script>
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var ROW = 19, OVERSCAN = 30;  // keep in step with .row height
  var chart = document.getElementById("chart");
  var viewport = document.getElementById("viewport");
  var canvas = document.getElementById("canvas");
  var axis = document.getElementById("axis");
  var tip = document.getElementById("tip");
  var virtualise = D.rows.length > Number(chart.dataset.virtualiseAbove);
  var span = D.span || 1;
  var colours = ["var(--o0)", "var(--o1)", "var(--o2)", "var(--o3)", "var(--o4)", "var(--o5)",
                 "var(--o6)"];
  var unitColour = {done: 0, failed: 1, timeout: 2, interrupted: 3, in_progress: 4,
                    blocked: 5, dep_blocked: 5};

  // Bars grouped by row once: drawing a window of rows is then O(rows in view).
  var byRow = new Array(D.rows.length);
  var laidOut = 0;
  for (var i = 0; i < D.bars.length; i++) {
    var b = D.bars[i];
    if (!(b[0] >= 0 && b[0] < D.rows.length) || !(b[2] >= b[1])) continue;
    (byRow[b[0]] || (byRow[b[0]] = [])).push(b);
    laidOut++;
  }
  chart.dataset.laidOutBars = String(laidOut);

  function fmtDur(s) {
    if (s == null) return "?";
    if (s < 10) return s.toFixed(1) + "s";
    s = Math.round(s);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60); s = s % 60;
    if (m < 60) return m + "m " + (s < 10 ? "0" : "") + s + "s";
    var h = Math.floor(m / 60); m = m % 60;
    return h + "h " + (m < 10 ? "0" : "") + m + "m";
  }
  function tickLabel(s) {
    if (s < 60) return Math.round(s) + "s";
    if (s < 3600) return (s % 60 ? fmtDur(s) : (s / 60) + "m");
    var h = Math.floor(s / 3600), m = Math.round((s % 3600) / 60);
    return h + "h" + (m ? " " + m + "m" : "");
  }
  function clock(off) {
    return new Date((D.t0 + off) * 1000).toISOString().slice(11, 19);
  }
  function pct(x) { return (100 * x / span).toFixed(4) + "%"; }
  function describe(row, b) {
    var tries = byRow[b[0]] ? byRow[b[0]].length : 1;
    return D.rows[row][0] + "\nattempt " + b[4] + " of " + tries + " · " + D.outcomes[b[3]] +
      (b[7] ? " (no finish recorded)" : "") +
      "\nexit code " + (b[5] == null ? "—" : b[5]) + " · duration " + fmtDur(b[6]) +
      "\n" + clock(b[1]) + " → " + clock(b[2]) + " UTC";
  }

  // Axis: about six round ticks over the span.
  (function () {
    var steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600,
                 43200, 86400];
    var step = steps[steps.length - 1];
    for (var k = 0; k < steps.length; k++) { if (span / steps[k] <= 7) { step = steps[k]; break; } }
    var html = "";
    for (var t = 0; t <= span + 1e-9; t += step) {
      html += '<span class="tick" style="left:' + pct(t) + '">+' + tickLabel(t) +
              "</span>";
    }
    axis.innerHTML = html;
    var grid = "";
    for (var g = step; g < span; g += step) grid += '<div class="grid" style="left:calc(' +
      "var(--label) + (100% - var(--label)) * " + (g / span).toFixed(5) + ')"></div>';
    canvas.dataset.grid = grid;
  })();

  function rowHtml(r) {
    var u = D.rows[r], bars = byRow[r] || [], out = [];
    var c = unitColour[u[1]];
    out.push('<div class="row' + (r % 2 ? " alt" : "") + '" style="top:' + (r * ROW) +
      'px"><div class="label" title="' +
      esc(u[0] + " · " + u[1]) + '"><span class="s" style="background:' +
      (c == null ? "#c4c9d1" : colours[c]) + '"></span>' + esc(u[0]) + '</div><div class="track">');
    for (var j = 0; j < bars.length; j++) {
      var b = bars[j];
      out.push('<div class="bar o' + b[3] + (b[7] ? " open" : "") + '" data-row="' + r +
        '" data-i="' + j + '" style="left:' + pct(b[1]) + ";width:" + pct(b[2] - b[1]) +
        '" title="' + esc(describe(r, b)) + '"></div>');
    }
    out.push("</div></div>");
    return out.join("");
  }
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }

  canvas.style.height = (D.rows.length * ROW) + "px";
  var drawn = [-1, -1];
  function draw() {
    var lo = 0, hi = D.rows.length;
    if (virtualise) {
      lo = Math.max(0, Math.floor(viewport.scrollTop / ROW) - OVERSCAN);
      hi = Math.min(D.rows.length,
                    Math.ceil((viewport.scrollTop + viewport.clientHeight) / ROW) + OVERSCAN);
      if (lo === drawn[0] && hi === drawn[1]) return;
    }
    var parts = [];
    for (var r = lo; r < hi; r++) parts.push(rowHtml(r));
    canvas.innerHTML = (canvas.dataset.grid || "") + parts.join("");
    drawn = [lo, hi];
    chart.dataset.renderedBars = String(canvas.querySelectorAll(".bar").length);
    chart.dataset.renderedRows = String(hi - lo);
  }
  var pending = false;
  viewport.addEventListener("scroll", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); });
  });
  window.addEventListener("resize", function () { drawn = [-1, -1]; draw(); });
  draw();
  if (!D.rows.length) canvas.innerHTML = '<p class="muted">no units</p>';

  // A styled tooltip that follows the pointer (the title attribute stays for accessibility).
  canvas.addEventListener("mousemove", function (e) {
    var t = e.target;
    if (!t.classList || !t.classList.contains("bar")) { tip.style.display = "none"; return; }
    // Move the title aside while hovering so the browser's own tooltip does not double ours.
    if (t.hasAttribute("title")) { t.dataset.tip = t.getAttribute("title"); t.removeAttribute("title"); }
    tip.textContent = t.dataset.tip;
    tip.style.display = "block";
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  });
  canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
})();
</script>
</body></html>
"""
