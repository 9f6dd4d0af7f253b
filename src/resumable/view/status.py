"""Status rendering: a run document -> lines of styled segments. Pure (no I/O, no clock reads).

A line is a list of ``(text, style)`` segments; the style is a rich style string ("bold green")
or "". The CLI prints them plain, or through rich on a colour terminal, so this module needs no
terminal and no rich import (rich costs ~60 ms to import; piped output should not pay it).

Every reader here is null-safe: a hand-edited document may hold a null unit, a string where an
object belongs, or no units at all, and the view shows it as malformed rather than crashing.
Rendering is one O(N) pass over the units; only a capped number of them get a detail line, so a
100,000-unit run renders as fast as it can be counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from resumable.core import recipe
from resumable.core.model import ACTIVE_RUN_STATES
from resumable.core.stamps import format_duration, parse_stamp
from resumable.view import liveness
from resumable.view.liveness import Verdict

Seg = tuple[str, str]
Line = list[Seg]

# The seed's canonical phase order; other phases follow in the order the document holds them
# (creation order carries meaning that the seed's alphabetical fallback throws away).
CANONICAL_PHASES: Final = (
    "build", "simplify", "test", "review", "performance", "ship_prep", "auto_learn", "auto_map",
    "finalize",
)
LIVE: Final = ACTIVE_RUN_STATES
STATUS_STYLE: Final = {
    "running": ("●", "RUNNING", "bold blue"),
    "initializing": ("○", "INITIALIZING", "bold blue"),
    "done": ("✓", "DONE", "bold green"),
    "needs_attention": ("!", "NEEDS ATTENTION", "bold yellow"),
    "aborted": ("✗", "ABORTED", "bold red"),
}
UNIT_GLYPH: Final = {
    "done": ("✓", "green"),
    "in_progress": ("▶", "blue"),
    "failed": ("✗", "red"),
    "timeout": ("⏱", "red"),
    "blocked": ("■", "yellow"),
    "dep_blocked": ("⋯", "yellow"),
    "interrupted": ("↯", "magenta"),
    "pending": ("·", "dim"),
}
PHASE_GLYPH: Final = {
    "done": ("✓", "green"),
    "running": ("▶", "bold blue"),
    "pending": ("·", "dim"),
    "blocked": ("■", "yellow"),
    "skipped": ("-", "dim"),
}
# Detail lines go to the units that need a human first.
ATTENTION_ORDER: Final = (
    "failed", "timeout", "blocked", "interrupted", "malformed", "unknown", "in_progress",
    "dep_blocked",
)
COUNT_ORDER: Final = ("in_progress", "failed", "timeout", "blocked", "dep_blocked", "pending")
COUNT_LABEL: Final = {"in_progress": "running"}
UNITS_STATES: Final = (
    "pending", "in_progress", "running", "done", "blocked", "dep_blocked", "failed", "timeout",
    "interrupted", "malformed",
)
DETAIL_LIMIT: Final = 20
RECONCILED_LIMIT: Final = 10
FINDINGS_LIMIT: Final = 10


# ---- small pure helpers ------------------------------------------------------------------------

parse_ts = parse_stamp
fmt_dur = format_duration


def fmt_age(ts: object, now: float) -> str:
    """The seed's relative time: Ns / Nm / Nh Mm ago under 48 h, else Nd ago."""
    t = parse_ts(ts)
    if t is None:
        return "?"
    s = max(0, int(now - t))
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    if s < 48 * 3600:
        return f"{s // 3600}h {(s % 3600) // 60}m ago"
    return f"{s // 86400}d ago"


def ran_seconds(doc: Mapping[str, Any], now: float, *, open_session: bool = True) -> float | None:
    """How long the run actually ran. A runner's run sums its sessions (``ranSeconds``, kept by the
    begin and finalize events), so the idle time between invocations is not counted; an open
    session counts up to now while the run is live, else up to its last write (a runner that died).
    A run written only by the seed verbs ran from its creation to its finish (or last update)."""
    total = doc.get("ranSeconds")
    session = parse_ts(doc.get("sessionStartedAt"))
    counted = total if isinstance(total, (int, float)) and not isinstance(total, bool) else None
    if counted is not None or session is not None:
        ran = float(counted or 0.0)
        if session is not None and open_session:
            end = now if doc.get("status") in LIVE else parse_ts(doc.get("updatedAt"))
            if end is not None:
                ran += max(end - session, 0.0)
        return ran
    created = parse_ts(doc.get("createdAt"))
    end = parse_ts(doc.get("finishedAt")) or parse_ts(doc.get("updatedAt"))
    if created is None or end is None or (doc.get("status") in LIVE and not doc.get("finishedAt")):
        return None
    return end - created


def one_line(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _str(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def unit_bucket(unit: object) -> str:
    """The state a unit is counted under: its status, 'malformed', or 'unknown'."""
    if not isinstance(unit, dict):
        return "malformed"
    if unit.get("removed") is True:
        return "removed"  # a step the job file no longer has: shown, never counted in done/total
    st = unit.get("status")
    if not isinstance(st, str):
        return "malformed"
    return st if st in UNIT_GLYPH else "unknown"


def last_attempt(unit: Mapping[str, Any]) -> Mapping[str, Any] | None:
    attempts = unit.get("attempts")
    if isinstance(attempts, list):
        for a in reversed(attempts):
            if isinstance(a, dict):
                return a
    return None


def unit_facts(unit: object, now: float) -> list[str]:
    """attempts, last exit code, duration (elapsed while running), log: what a triager needs."""
    if not isinstance(unit, dict):
        return []
    facts: list[str] = []
    attempts = unit.get("attempts")
    att = last_attempt(unit)
    if isinstance(attempts, list) and attempts:
        facts.append(f"attempt {att.get('n', len(attempts)) if att else len(attempts)}")
    exit_code = att.get("exitCode") if att else None
    if att is None and unit.get("status") != "in_progress":
        # A seed unit's only exit code; a unit with attempts shows its last attempt's, so a step
        # running again never shows the exit code of the attempt before.
        exit_code = unit.get("lastExitCode")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        facts.append(f"exit {exit_code}")
    status = unit.get("status")
    dur: float | None = None
    if att is not None and isinstance(att.get("duration"), int | float):
        dur = float(att["duration"])
    start = parse_ts(att.get("startedAt") if att else None) or parse_ts(unit.get("startedAt"))
    if status == "in_progress" and start is not None:
        facts.append(f"running {fmt_dur(now - start)}")
    else:
        if dur is None and start is not None:
            end = parse_ts(att.get("finishedAt") if att else None) or parse_ts(
                unit.get("finishedAt")
            )
            if end is not None and end >= start:
                dur = end - start
        if dur is not None:
            facts.append(fmt_dur(dur))
    log = _str(att.get("log")) if att else None
    log = log or _str(unit.get("log"))
    if log:
        facts.append(f"log {log}")
    return facts


# ---- the summary pass ----------------------------------------------------------------------------

@dataclass
class Tally:
    """One O(N) pass over the units: counts per bucket and the first few ids of each."""

    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, list[str]] = field(default_factory=dict)
    reconciled: list[tuple[str, str]] = field(default_factory=list)
    reconciled_count: int = 0
    first_start: float | None = None

    @property
    def done(self) -> int:
        return self.counts.get("done", 0)


def tally(doc: Mapping[str, Any], keep: int = DETAIL_LIMIT) -> Tally:
    units = doc.get("units")
    t = Tally()
    if not isinstance(units, dict):
        return t
    counts = t.counts
    first = t.first
    for uid, unit in units.items():
        b = unit_bucket(unit)
        counts[b] = counts.get(b, 0) + 1
        if b == "removed":
            continue
        if b != "done" and b != "pending":
            ids = first.setdefault(b, [])
            if len(ids) < keep:
                ids.append(uid)
        elif b == "done":
            note = unit.get("note")
            if isinstance(note, str) and note.startswith("reconciled-from-trailer"):
                t.reconciled_count += 1
                if len(t.reconciled) < keep:
                    t.reconciled.append((uid, note))
    t.total = len(units) - counts.get("removed", 0)
    return t


def eta(doc: Mapping[str, Any], t: Tally, now: float) -> float | None:
    """Remaining time at the run's average throughput so far; None until something finished."""
    start = parse_ts(doc.get("createdAt"))
    if start is None or t.done == 0 or now <= start:
        return None
    remaining = t.total - t.done
    if remaining <= 0:
        return None
    return remaining * (now - start) / t.done


# ---- the default view ----------------------------------------------------------------------------

def _badge(status: object) -> Line:
    glyph, label, style = STATUS_STYLE.get(
        status if isinstance(status, str) else "", ("?", str(status).upper(), "bold magenta")
    )
    return [(f"{glyph} {label}", style)]


def progress_bar(done: int, total: int, width: int) -> Line:
    width = max(5, width)
    filled = 0 if total <= 0 else min(width, round(width * done / total))
    pct = 0 if total <= 0 else int(100 * done / total)
    return [
        ("█" * filled, "green"),
        ("░" * (width - filled), "dim"),
        (f" {done}/{total} done ({pct}%)", "bold"),
    ]


def phase_line(doc: Mapping[str, Any]) -> Line | None:
    phases = doc.get("phases")
    if not isinstance(phases, dict) or not phases:
        return None
    names = [p for p in CANONICAL_PHASES if p in phases]
    names += [p for p in phases if p not in CANONICAL_PHASES]
    current = doc.get("currentPhase")
    line: Line = [("phases   ", "dim")]
    for i, name in enumerate(names):
        ph = phases.get(name)
        st = ph.get("status") if isinstance(ph, dict) else None
        glyph, style = PHASE_GLYPH.get(st if isinstance(st, str) else "", ("?", "magenta"))
        if i:
            line.append((" → ", "dim"))
        if name == current:
            line.append((f"[{glyph} {name}]", "bold " + style.replace("bold ", "")))
        else:
            line.append((f"{glyph} {name}", style))
    return line


def finding_line(item: object) -> Line:
    if not isinstance(item, dict):
        return [("  • ", "yellow"), (one_line(item, 160), "")]
    sev = _str(item.get("severity")) or _str(item.get("kind"))
    iid = _str(item.get("id")) or "?"
    text = None
    for key in ("issue", "title", "message", "summary", "note", "text", "description"):
        text = _str(item.get(key))
        if text:
            break
    if text is None:
        rest = {k: v for k, v in item.items() if k not in ("id", "at", "severity", "kind")}
        text = one_line(rest, 160) if rest else ""
    line: Line = [("  • ", "yellow")]
    if sev:
        line.append((f"[{sev}] ", "red" if sev in ("blocker", "critical", "high") else "yellow"))
    line.append((iid, "bold"))
    if text:
        line.append(("  " + one_line(text, 160), ""))
    return line


def unit_line(uid: str, unit: object, now: float, extra: str = "", pad: int = 0) -> Line:
    """One unit's detail line; ``pad`` aligns the ids of a block of lines."""
    b = unit_bucket(unit)
    uid = uid.ljust(pad)
    if b == "malformed":
        return [("  ? ", "magenta"), (uid, "bold"), (f"  malformed unit ({one_line(unit, 60)})",
                                                     "magenta")]
    assert isinstance(unit, dict)
    st = unit.get("status")
    glyph, style = UNIT_GLYPH.get(st if isinstance(st, str) else "", ("?", "magenta"))
    label = "running" if st == "in_progress" else str(st)
    line: Line = [(f"  {glyph} ", style), (uid, "bold"), (f"  {label}", style)]
    facts = unit_facts(unit, now)
    if extra:
        facts.insert(0, extra)
    if facts:
        line.append(("  " + " · ".join(facts), "dim"))
    note = _str(unit.get("note"))
    if note:
        line.append(("  — " + one_line(note, 120), ""))
    return line


def render_status(
    doc: Mapping[str, Any],
    *,
    file: str,
    now: float,
    width: int = 80,
    here: str | None = None,
    detail_limit: int = DETAIL_LIMIT,
    show_eta: bool = False,
    verdict: Verdict | None = None,
    overlay: Sequence[Line] = (),
    runs_dir: str | None = None,
    store: tuple[str, str] | None = None,
) -> list[Line]:
    """The default status view of one run, in the seed's order (§1.6), O(N) in units.

    ``verdict`` says what works on a live run now (``view.liveness``; None when that cannot be
    asked); ``overlay`` the live workflow lines; ``runs_dir`` a line saying which runs directory was
    found, when it was found by walking up; ``store`` the option naming the store, which the hints
    repeat (``recipe.with_store``)."""
    out: list[Line] = []
    units_raw = doc.get("units")
    units: Mapping[str, Any] = units_raw if isinstance(units_raw, dict) else {}
    status = doc.get("status")
    task = doc.get("task")
    badge = _badge(status)
    if verdict is not None and verdict.state in liveness.BADGES:
        badge = [liveness.BADGES[verdict.state]]
    out.append([*badge, ("  ", ""), (one_line(task, 200) if task else "(no task)", "bold")])
    if verdict is not None:
        out.extend(liveness.explanation(verdict, status))
    run_id = doc.get("id")
    created = parse_ts(doc.get("createdAt"))
    stamp_line: Line = [("id " + (str(run_id) if run_id is not None else "?"), "dim")]
    stamp_line.append((f" · started {doc.get('createdAt') or '?'}", "dim"))
    stamp_line.append((f" · updated {doc.get('updatedAt') or '?'}", "dim"))
    session = parse_ts(doc.get("sessionStartedAt"))
    if verdict is not None and not verdict.live:
        # Nothing works on it: its last session ran up to its last write, not up to now.
        ran = ran_seconds({**doc, "status": "stopped"}, now)
        if ran is not None:
            stamp_line.append((f" · ran {fmt_dur(ran)}", "dim"))
    elif status in LIVE and session is not None:
        before = ran_seconds(doc, now, open_session=False)
        stamp_line.append((f" · running for {fmt_dur(now - session)}"
                           + (f" (ran {fmt_dur(before)} before)" if before else ""), "dim"))
    elif created is not None:
        ran = ran_seconds(doc, now)
        if ran is not None:
            stamp_line.append((f" · ran {fmt_dur(ran)}", "dim"))
        elif status in LIVE:
            stamp_line.append((f" · running for {fmt_dur(now - created)}", "dim"))
    out.append(stamp_line)
    out.append([("file     ", "dim"), (file, "")])
    if runs_dir:
        out.append([("runs     ", "dim"), (runs_dir, "dim")])
    pipeline = doc.get("pipeline")
    if isinstance(pipeline, dict):
        refs = [_str(pipeline.get(k)) for k in ("integrationRef", "targetRef")]
        shown = [r.removeprefix("refs/heads/") for r in refs if r]
        if shown:
            out.append([("branch   ", "dim"), (" → ".join(shown), "")])
    ph = phase_line(doc)
    if ph:
        out.append(ph)
    if not isinstance(units_raw, dict) and units_raw is not None:
        out.append([("units    ", "dim"), (f"malformed (a JSON {type(units_raw).__name__})",
                                             "magenta")])

    t = tally(doc, keep=detail_limit)
    bar_w = max(10, min(40, width - 34))
    out.append([("units    ", "dim"), *progress_bar(t.done, t.total, bar_w)])
    chips: Line = [("         ", "")]
    for i, b in enumerate((*COUNT_ORDER, "interrupted", "malformed", "unknown", "removed")):
        n = t.counts.get(b, 0)
        if b not in COUNT_ORDER and n == 0:
            continue
        if i:
            chips.append((" · ", "dim"))
        style = UNIT_GLYPH.get(b, ("", "magenta"))[1] if n else "dim"
        chips.append((f"{COUNT_LABEL.get(b, b)} {n}", style))
    if show_eta and status in LIVE:
        e = eta(doc, t, now)
        chips.append((f"   ETA ≈ {fmt_dur(e)}" if e is not None else "   ETA —", "cyan"))
    out.append(chips)

    rs = recipe.resume_set(doc)
    roots: Mapping[str, str] = rs["dep_blocked"]
    # The live view leads with what is running (elapsed times tick there); a snapshot view leads
    # with what needs a human.
    order = ("in_progress", *(b for b in ATTENTION_ORDER if b != "in_progress")) if show_eta \
        else ATTENTION_ORDER
    attention = [b for b in order if t.counts.get(b)]
    if attention:
        out.append([("needs attention", "bold")])
        n_shown = 0
        hidden: dict[str, int] = {}
        pad = min(24, max(len(u) for b in attention for u in t.first.get(b, [""])))
        for b in attention:
            take = t.first.get(b, [])[: max(0, detail_limit - n_shown)]
            for uid in take:
                extra = f"waiting on {roots[uid]}" if uid in roots and b == "dep_blocked" else ""
                out.append(unit_line(uid, units.get(uid), now, extra, pad))
            n_shown += len(take)
            if t.counts[b] > len(take):
                hidden[b] = t.counts[b] - len(take)
        if hidden:
            more = sum(hidden.values())
            parts = ", ".join(f"{COUNT_LABEL.get(b, b)} {n}" for b, n in hidden.items())
            listing = recipe.command(["resumable", "status", str(doc.get("id")), "--units", "STATE", *(store or ())])
            out.append([(f"  … and {more} more ({parts}); list them with `{listing}`", "dim")])
    if t.reconciled_count:
        for uid, note in t.reconciled[:RECONCILED_LIMIT]:
            # The seed's words, verbatim: scripts grep for reconciled-from-trailer:<sha>.
            out.append([("  ↺ ", "cyan"), (uid, "bold"), (f"  {one_line(note, 120)}", "dim")])
        rest = t.reconciled_count - min(len(t.reconciled), RECONCILED_LIMIT)
        if rest > 0:
            out.append([(f"  … and {rest} more reconciled from commit trailers", "dim")])

    out.extend(overlay)
    open_items = doc.get("openItems")
    open_list = open_items if isinstance(open_items, list) else []
    resolved = doc.get("resolvedItems")
    n_resolved = len(resolved) if isinstance(resolved, list) else 0
    out.append([("open     ", "dim"), (str(len(open_list)), "bold yellow" if open_list else ""),
                (f"   resolved {n_resolved}", "dim")])
    for item in open_list[:FINDINGS_LIMIT]:
        out.append(finding_line(item))
    if len(open_list) > FINDINGS_LIMIT:
        out.append([(f"  … and {len(open_list) - FINDINGS_LIMIT} more open findings", "dim")])

    fv = doc.get("finalValidation")
    req = " (required)" if doc.get("requireValidation") is True else ""
    if isinstance(fv, dict) and fv.get("status") in ("green", "red"):
        green = fv.get("status") == "green"
        # The seed's words (`validation green` / `validation red`), which scripts grep for.
        vline: Line = [("validation ", "dim"),
                       ("green ✓" if green else "red ✗", "bold green" if green else "bold red")]
        if _str(fv.get("at")):
            vline.append((f"  at {fv['at']}", "dim"))
        if _str(fv.get("note")):
            vline.append(("  — " + one_line(fv["note"], 120), ""))
        out.append(vline)
    else:
        out.append([("validation ", "dim"), ("not recorded" + req, "dim")])
    if doc.get("result") is not None:
        out.append([("result   ", "dim"), (one_line(doc.get("result"), 300), "")])

    out.append([])
    out.extend(footer(doc, file=file, here=here, rs=rs, open_count=len(open_list), tally_=t, verdict=verdict,
                      store=store))
    return out


def footer(
    doc: Mapping[str, Any],
    *,
    file: str,
    here: str | None,
    rs: dict[str, Any],
    open_count: int,
    tally_: Tally,
    verdict: Verdict | None = None,
    store: tuple[str, str] | None = None,
) -> list[Line]:
    """What to do next: converged, not resumable, or the exact resume command (and, for a live run
    nothing works on, what to do first)."""
    status = doc.get("status")
    if status == "done":
        return [[("✓ converged", "bold green"), (": nothing to resume", "")]]
    if status == "aborted":
        return [[("✗ aborted", "bold red"), (": not resumable", "")]]
    pending = tally_.total - tally_.done
    if status in LIVE or status == "needs_attention" or open_count or pending:
        import os

        desc = recipe.classify(doc, os.path.abspath(file), here=here, rs=rs, store=store)
        if verdict is not None:
            return liveness.footer(verdict, doc, desc, recipe.set_line(rs), file=file, store=store)
        prefix = "if its runner has stopped, resume" if status in LIVE else "resume"
        if desc.get("runnable"):
            return [[(f"→ {prefix}: ", "bold"), (str(desc["shell"]), "bold cyan"),
                     (f"   ({recipe.set_line(rs)})", "dim")]]
        more = recipe.command(["resumable", "status", str(doc.get("id")), "--resume", *(store or ())])
        return [[("→ not runnable as a command", "bold yellow"),
                 (f" ({desc.get('kind')}: {desc.get('reason')}); {recipe.set_line(rs)}; see `{more}`", "dim")]]
    return [[("nothing pending", "dim")]]


# ---- other views -----------------------------------------------------------------------------------

def render_units(doc: Mapping[str, Any], state: str, now: float) -> list[Line]:
    """Every unit in one state (--units STATE); 'running' means in_progress."""
    want = "in_progress" if state == "running" else state
    units = doc.get("units")
    out: list[Line] = []
    if isinstance(units, dict):
        chosen = [(uid, unit) for uid, unit in units.items() if unit_bucket(unit) == want]
        pad = min(24, max((len(uid) for uid, _ in chosen), default=0))
        out = [unit_line(uid, unit, now, pad=pad) for uid, unit in chosen]
    if not out:
        out.append([(f"no units are {state}", "dim")])
    return out


def list_line(
    path_name: str, doc: Mapping[str, Any] | None, error: str | None, now: float,
    verdict: Verdict | None = None,
) -> Line:
    """One `--list` line: glyph, id padded to 26, current phase, done/total, age; for a judged live
    run (``view.liveness``), the verdict's glyph and what works on it."""
    if doc is None:
        return [("! ", "bold red"), (path_name, "bold"), (f" (unreadable: {error})", "red")]
    status = doc.get("status")
    glyph, _, style = STATUS_STYLE.get(status if isinstance(status, str) else "",
                                        ("?", "", "magenta"))
    if verdict is not None:
        glyph, style = liveness.GLYPHS.get(verdict.state, (glyph, style))
    rid = doc.get("id")
    rid_s = rid if isinstance(rid, str) and rid else path_name.removesuffix(".json")
    phase = _str(doc.get("currentPhase")) or "—"
    counted = tally(doc, keep=0)
    total, done = counted.total, counted.done
    when = doc.get("updatedAt") or doc.get("createdAt")
    line: Line = [(f"{glyph} ", style), (f"{rid_s:<26}", "bold"), (f" {phase:<14}", ""),
                  (f" {done}/{total}".ljust(14), ""), (f" {fmt_age(when, now)}", "dim")]
    if verdict is not None:
        line.append((f"  ({verdict.summary()})", style if not verdict.live else "dim"))
    return line


def plain(line: Sequence[Seg]) -> str:
    return "".join(text for text, _ in line)
