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
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypedDict

from resumable.core import jsonio
from resumable.core.instance import SEP
from resumable.core.stamps import stamp
from resumable.core.text import escape_controls
from resumable.view import status as view
from resumable.view.units import tally, unit_bucket

MIN_SPAN: Final = 0.001  # seconds: attempt times have millisecond precision
VIRTUALISE_ABOVE: Final = 800  # rows; below this every row is in the DOM (hover works anywhere)
OUTCOMES: Final = ("done", "failed", "timeout", "interrupted", "running", "blocked", "other")
FAILURES: Final = ("failed", "timeout")
PINNED: Final = FAILURES  # rows shown first in the timeline
_ATTEMPT_OUTCOME: Final = {
    "done": "done", "failed": "failed", "timeout": "timeout", "interrupted": "interrupted",
    "running": "running", "in_progress": "running", "blocked": "blocked",
    "dep_blocked": "blocked",
}


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


_Span = tuple[float, float | None, str, int, int | None, float | None]  # start, end, outcome, n, exit, duration


def _exit_code(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unit_spans(unit: object, bucket: str) -> list[_Span]:
    """One span per attempt of the unit that has a start; a unit a script wrote (through a
    low-level verb) has no attempts, only its own start/finish: one span for its one run."""
    if not isinstance(unit, dict):
        return []
    attempts = unit.get("attempts")
    spans: list[_Span] = []
    if isinstance(attempts, list) and attempts:
        for i, a in enumerate(attempts):
            start = view.parse_ts(a.get("startedAt")) if isinstance(a, dict) else None
            if not isinstance(a, dict) or start is None:
                continue
            end = view.parse_ts(a.get("finishedAt"))
            dur = _num(a.get("duration"))
            if end is None and dur is not None:
                end = start + dur
            st = a.get("status")
            outcome = _ATTEMPT_OUTCOME.get(st if isinstance(st, str) else "", "other")
            n = a.get("n")
            spans.append((start, end, outcome, n if isinstance(n, int) else i + 1, _exit_code(a.get("exitCode")), dur))
        return spans
    start = view.parse_ts(unit.get("startedAt"))
    if start is not None:
        spans.append((start, view.parse_ts(unit.get("finishedAt")), _ATTEMPT_OUTCOME.get(bucket, "other"), 1,
                      _exit_code(unit.get("lastExitCode")), None))
    return spans


class Timeline(TypedDict):
    """What the page draws, as compact arrays (``timeline``); times in seconds from ``t0``."""

    t0: float
    span: float
    rows: list[list[Any]]  # [unit id, its bucket]
    bars: list[list[Any]]  # [row, start, end, outcome index, attempt n, exit code, duration, open]
    outcomes: list[str]


def timeline(doc: Mapping[str, Any], now: float | None = None) -> Timeline:
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
        bucket = unit_bucket(unit)
        rows.append([str(uid), bucket])
        spans = _unit_spans(unit, bucket)
        raw.extend((row, *s) for s in spans)
        first_start.append(min((s[0] for s in spans), default=float("inf")))

    starts = [b[1] for b in raw]
    ends = [b[2] for b in raw if b[2] is not None]
    run_end = view.parse_ts(doc.get("finishedAt"))
    if run_end is None:
        run_end = view.parse_ts(doc.get("updatedAt"))
        if now is not None and doc.get("status") in view.LIVE:
            run_end = max(run_end or now, now)
    t0 = min(starts) if starts else (view.parse_ts(doc.get("createdAt")) or 0.0)
    # The axis ends where the data ends: the run's own (second-precision) finish would add idle
    # time after the last attempt. Only an attempt with no finish runs to the run's end (or now).
    t1 = max([t0, *starts, *ends])
    if run_end is not None and (not raw or any(b[2] is None for b in raw)):
        t1 = max(t1, run_end)
    bars: list[list[Any]] = []
    for row, start, end, outcome, n, code, dur in raw:
        is_open = end is None
        stop = t1 if end is None else max(end, start)
        if dur is None and not is_open:
            dur = stop - start
        bars.append([row, round(start - t0, 3), round(stop - t0, 3), OUTCOMES.index(outcome), n,
                     code, None if dur is None else round(dur, 3), 1 if is_open else 0])
    # Gantt order: what failed or timed out first (what a reader opens the report for), then
    # units by first start, never-started units last in document order.
    order = sorted(range(len(rows)), key=lambda r: (rows[r][1] not in PINNED, first_start[r], r))
    position = {old: new for new, old in enumerate(order)}
    rows = [rows[r] for r in order]
    for b in bars:
        b[0] = position[b[0]]
    # The axis spans the data exactly (a run of fast steps is not squeezed into a corner of a
    # one-second axis); the page draws every bar at least a few pixels wide inside it.
    return {"t0": t0, "span": max(t1 - t0, MIN_SPAN), "rows": rows, "bars": bars,
            "outcomes": list(OUTCOMES)}


def repeats(doc: Mapping[str, Any], history: Iterable[Mapping[str, Any]] | None = None) -> tuple[int, int]:
    """(retries, re-runs) among the run's attempts. A retry is another attempt after a failed or
    timed-out one, in the same session, with no invalidation between: the run's own retry policy
    at work. Every other repeat is a re-run someone asked for: after a done attempt (``rerun``, a
    changed input, ``--force``), after an invalidation, or in a later session (a resume).

    ``history`` (the run's events, oldest first) tells sessions and invalidations apart exactly;
    without it (a run with no journal, or a caller with only the document) an attempt after a
    failed or timed-out one counts as a retry."""
    if history is not None:
        return _repeats_in(history)
    retries = reruns = 0
    units = doc.get("units")
    for unit in (units.values() if isinstance(units, dict) else ()):
        attempts = unit.get("attempts") if isinstance(unit, dict) else None
        if not isinstance(attempts, list):
            continue
        seen = [a for a in attempts if isinstance(a, dict)]
        for prev in seen[:-1]:
            if prev.get("status") in FAILURES:
                retries += 1
            else:
                reruns += 1
    return retries, reruns


def after_a_failure(doc: Mapping[str, Any]) -> bool:
    """Whether some attempt follows a failed or timed-out one: only then can the history tell a
    retry from a re-run better than the document (every other repeat is a re-run either way)."""
    units = doc.get("units")
    for unit in (units.values() if isinstance(units, dict) else ()):
        attempts = unit.get("attempts") if isinstance(unit, dict) else None
        if isinstance(attempts, list) and any(isinstance(a, dict) and a.get("status") in FAILURES
                                              for a in attempts[:-1]):
            return True
    return False


def _repeats_in(history: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    session = 0
    # unit -> (last attempt n, its outcome, the session it ran in, invalidated since)
    last: dict[str, tuple[object, object, int, bool]] = {}
    retries = reruns = 0
    for event in history:
        t = event.get("t")
        if t == "begin":
            session += 1
        elif t == "invalidate" and isinstance(event.get("unit"), str) and event["unit"] in last:
            n, outcome, ran_in, _ = last[event["unit"]]
            last[event["unit"]] = (n, outcome, ran_in, True)
        elif t == "unit" and isinstance(event.get("attempt"), dict) and isinstance(event.get("unit"), str):
            uid, attempt = event["unit"], event["attempt"]
            prev = last.get(uid)
            if prev is not None and prev[0] != attempt.get("n"):
                if prev[1] in FAILURES and prev[2] == session and not prev[3]:
                    retries += 1
                else:
                    reruns += 1
            last[uid] = (attempt.get("n"), attempt.get("status"), session, False)
    return retries, reruns


def summary_numbers(doc: Mapping[str, Any], tl: Timeline, now: float | None = None,
                    history: Iterable[Mapping[str, Any]] | None = None) -> list[tuple[str, str, str]]:
    """(label, value, css class) cards for the header."""
    t = tally(doc, keep=0)
    bars = tl["bars"]
    retries, reruns = repeats(doc, history)
    ran = view.ran_seconds(doc, now if now is not None else time.time())
    wall = view.fmt_dur(ran) if ran is not None else "—"
    cards = [("units", str(t.total), ""), ("done", str(t.done), "done")]
    for b in ("failed", "timeout", "in_progress", "blocked", "dep_blocked", "pending",
              "interrupted", "malformed"):
        n = t.counts.get(b, 0)
        if n or b in ("failed", "timeout", "pending"):
            cards.append(("running" if b == "in_progress" else b.replace("_", " "), str(n),
                          b if n else "zero"))
    cards += [("attempts", str(len(bars)), ""), ("retries", str(retries), ""), ("re-runs", str(reruns), ""),
              ("ran", wall, "")]
    return cards


FAMILY_SHOWN: Final = 20  # instances named under a family, at most


def families_html(doc: Mapping[str, Any]) -> str:
    """A section with a line per family of steps (instances ``family+...``): done/total and the
    count of each other state, and under it the instances that failed, timed out or are running."""
    t = tally(doc, keep=0)
    if not t.families or not view.runner_launched(doc):
        return ""
    units = doc.get("units")
    troubled: dict[str, list[tuple[str, str]]] = {}
    if isinstance(units, dict):
        for uid, unit in units.items():
            b = unit_bucket(unit)
            if b in ("failed", "timeout", "in_progress", "interrupted") and SEP in uid:
                got = troubled.setdefault(uid.partition(SEP)[0], [])
                if len(got) < FAMILY_SHOWN:
                    got.append((uid, "running" if b == "in_progress" else b))
    rows = []
    for name, counts in sorted(t.families.items(), key=lambda kv: t.family_order[kv[0]]):
        total = sum(n for b, n in counts.items() if b != "removed")
        chips = "".join(f" · {text('running' if b == 'in_progress' else b)} {n}" for b, n in counts.items()
                        if n and b != "done")
        shown = troubled.get(name, [])
        more = counts.get("failed", 0) + counts.get("timeout", 0) + counts.get("in_progress", 0) \
            + counts.get("interrupted", 0) - len(shown)
        inner = "".join(f'<li><code>{text(uid)}</code> <span class="o-{text(st)}">{text(st)}</span></li>'
                        for uid, st in shown) + (f'<li class="muted">… and {more} more</li>' if more > 0 else "")
        rows.append(f"<li><b>{text(name)}</b> {counts.get('done', 0)}/{total} done{chips}"
                    + (f'<ul class="findings">{inner}</ul>' if inner else "") + "</li>")
    return f'<section><h2>Families of steps ({len(rows)})</h2><ul class="findings">{"".join(rows)}</ul></section>'


def text(value: object) -> str:
    """Data (a task, a note, an id) as HTML text: markup escaped, and control characters shown as
    escapes (``\\x1b``), as the terminal views show them; an HTML page may not carry them raw."""
    return html.escape(escape_controls(str(value)))


def _item_html(item: object) -> str:
    line = view.finding_line(item)
    sev = ""
    parts: list[str] = []
    for segment, style in line[1:]:
        if segment.startswith("[") and segment.rstrip().endswith("]"):
            sev = segment.strip()[1:-1]
        elif style == "bold":
            parts.append(f"<b>{text(segment)}</b>")
        else:
            parts.append(text(segment))
    badge = f'<span class="sev sev-{text(sev)}">{text(sev)}</span> ' if sev else ""
    return f"<li>{badge}{''.join(parts)}</li>"


_C1 = {c: f"\\u{c:04x}" for c in range(0x80, 0xA0)}  # json.dumps escapes C0 and DEL is harmless


def _script_json(value: object) -> str:
    # Inside <script> a "</script>" or "<!--" in a unit id or note would end the element early.
    return jsonio.stdlib_dumps(value, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c").translate(_C1)


def build_html(doc: Mapping[str, Any], *, now: float | None = None, file: str = "",
               history: Iterable[Mapping[str, Any]] | None = None) -> str:
    """The whole report page as one string; ``history``: the run's events, to tell retries from
    re-runs (``repeats``)."""
    tl = timeline(doc, now)
    status = doc.get("status")
    glyph, label, _ = view.STATUS_STYLE.get(status if isinstance(status, str) else "",
                                             ("?", str(status).upper(), ""))
    task = doc.get("task")
    run_id = doc.get("id")
    cards = "".join(
        f'<div class="card {html.escape(cls)}"><div class="num">{html.escape(v)}</div>'
        f'<div class="lbl">{html.escape(k)}</div></div>'
        for k, v, cls in summary_numbers(doc, tl, now, history)
    )
    open_items = doc.get("openItems")
    open_list = open_items if isinstance(open_items, list) else []
    resolved = doc.get("resolvedItems")
    n_resolved = len(resolved) if isinstance(resolved, list) else 0
    findings = "".join(_item_html(i) for i in open_list) or '<li class="none">none</li>'
    fv = doc.get("finalValidation")
    if isinstance(fv, dict) and fv.get("status") in ("green", "red"):
        note = f" — {fv.get('note')}" if isinstance(fv.get("note"), str) else ""
        validation = f'<span class="val val-{fv["status"]}">{fv["status"]}</span>{text(note)}'
    else:
        validation = '<span class="muted">not recorded</span>'
    result = doc.get("result")
    result_html = ("" if result is None else
                   f"<p><b>result</b> <code>{text(view.one_line(result, 500))}</code></p>")
    phases = view.phase_line(doc)
    phase_html = ""
    if phases:
        phase_html = " · phases " + text(view.plain(phases[1:]))
    legend = "".join(
        f'<span class="lg"><i class="o{i}"></i>{o}</span>' for i, o in enumerate(OUTCOMES)
        if any(b[3] == i for b in tl["bars"]) or o in ("done", "failed", "timeout")
    )
    meta = " · ".join(
        text(s) for s in (
            f"id {run_id}", f"started {doc.get('createdAt') or '?'}",
            f"updated {doc.get('updatedAt') or '?'}",
            *([f"finished {doc['finishedAt']}"] if doc.get("finishedAt") else []),
        )
    )
    fields = dict((
        ("TITLE", text(f"{run_id} — resumable report")),
        ("BADGE", f'<span class="badge st-{text(status)}">{text(glyph)} {text(label)}</span>'),
        ("TASK", text(task) if task is not None else "(no task)"),
        ("META", meta),
        ("FILE", text(file)),
        ("PHASES", phase_html),
        ("CARDS", cards),
        ("FAMILIES", families_html(doc)),
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
        ("GENERATED", text(stamp(now)) if now is not None else ""),
    ))
    return fill(template(), fields)


def template() -> str:
    """The page template, a file shipped in the package (``view/report.html``)."""
    from importlib.resources import files

    return files("resumable.view").joinpath("report.html").read_text(encoding="utf-8")


def fill(page: str, fields: Mapping[str, str]) -> str:
    """Every ``{{NAME}}`` of the template replaced in one pass, so a placeholder inside a value (a
    task holding ``{{DATA}}``) is never expanded."""
    import re

    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: fields.get(m.group(1), m.group(0)), page)
