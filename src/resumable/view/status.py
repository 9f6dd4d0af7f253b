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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from resumable.core import jsonio, recipe
from resumable.core.model import ACTIVE_RUN_STATES
from resumable.core.stamps import format_duration, parse_stamp
from resumable.view import liveness
from resumable.view.liveness import Verdict
from resumable.view.units import (
    DETAIL_LIMIT,
    UNIT_GLYPH,
    Tally,
    eta,
    rate_line,
    str_or_none,
    tally,
    unit_bucket,
    unit_facts,
)

if TYPE_CHECKING:
    from resumable.core.types import ResumeSet

Seg = tuple[str, str]
Line = list[Seg]

# run-status.mjs's canonical phase order; other phases follow in the order the document holds them
# (creation order carries meaning that its alphabetical fallback throws away).
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
RECONCILED_LIMIT: Final = 10
FINDINGS_LIMIT: Final = 10


@dataclass(frozen=True, slots=True)
class JobCheck:
    """Whether a run is up to date with its job as the files are now (``runner.freshness``):
    ``current`` (``resumable run`` would run nothing), ``stale`` (it would run ``to_run`` of
    ``total`` steps; ``reasons``: the first lines of its plan, ``more`` not shown) or ``unknown``
    (``note`` says why: the job file is gone, or cannot be read)."""

    state: str
    to_run: int = 0
    total: int = 0
    reasons: tuple[str, ...] = ()
    command: str = ""
    note: str = ""
    more: int = 0

    @property
    def ok(self) -> bool:
        return self.state == "current"


def check_lines(check: JobCheck | None) -> list[Line]:
    """The lines saying whether the run's job is up to date, and what a run would do."""
    if check is None:
        return []
    if check.state == "current":
        return [[("job      ", "dim"), ("up to date", "green"),
                 (f" (`{check.command}` would run nothing)" if check.command else "", "dim")]]
    if check.state == "unknown":
        return [[("job      ", "dim"), (check.note or "cannot tell whether it is up to date", "yellow")]]
    steps = "step" if check.total == 1 else "steps"
    out: list[Line] = [[("job      ", "dim"), ("out of date", "bold yellow"),
                        (f": `{check.command}` would run {check.to_run} of {check.total} {steps}", "")]]
    out.extend([("  " + r, "dim")] for r in check.reasons)
    if check.more:
        out.append([(f"  … and {check.more} more (`{check.command} --dry-run` lists them)", "dim")])
    return out


# ---- small pure helpers ------------------------------------------------------------------------

parse_ts = parse_stamp
fmt_dur = format_duration


def fmt_age(ts: object, now: float) -> str:
    """run-status.mjs's relative time: Ns / Nm / Nh Mm ago under 48 h, else Nd ago."""
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
    A run written only by the low-level verbs ran from its creation to its finish (or last update)."""
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


_str = str_or_none


def one_line(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else jsonio.stdlib_dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    detail: Callable[[Iterable[str]], Mapping[str, Any]] | None = None,
    check: JobCheck | None = None,
) -> list[Line]:
    """The default status view of one run, in ulpi's order, O(N) in units.

    ``verdict`` says what works on a live run now (``view.liveness``; None when that cannot be
    asked); ``overlay`` the live workflow lines; ``runs_dir`` a line saying which runs directory was
    found, when it was found by walking up; ``store`` the option naming the store, which the hints
    repeat (``recipe.with_store``). ``detail``: when ``doc`` holds digests for units (a large run read
    through its index), how to read whole the few units the view details. ``check``: whether its
    job is up to date (``runner.freshness``), when that was asked."""
    out = header_lines(doc, file=file, now=now, verdict=verdict, runs_dir=runs_dir)
    out += check_lines(check)
    t = tally(doc, keep=detail_limit)
    out += count_lines(doc, t, now=now, width=width, show_eta=show_eta)
    out += family_lines(doc, t)
    rs = recipe.resume_set(doc)
    shown = [uid for b in ATTENTION_ORDER for uid in t.first.get(b, ())]
    whole = detail(shown) if detail is not None and shown else None
    out += attention_lines(doc, t, rs, now=now, detail_limit=detail_limit, live_first=show_eta, store=store,
                           whole=whole)
    out.extend(overlay)
    open_items = doc.get("openItems")
    open_list = open_items if isinstance(open_items, list) else []
    out += findings_lines(doc, open_list)
    out.append([])
    out.extend(footer(doc, file=file, here=here, rs=rs, open_count=len(open_list), tally_=t, verdict=verdict,
                      store=store, check=check))
    return out


def header_lines(doc: Mapping[str, Any], *, file: str, now: float, verdict: Verdict | None,
                 runs_dir: str | None) -> list[Line]:
    """Badge and task, what works on it, when it started and for how long it ran, where it lives,
    its branch and phases."""
    status = doc.get("status")
    task = doc.get("task")
    badge = _badge(status)
    if verdict is not None and verdict.state in liveness.BADGES:
        badge = [liveness.BADGES[verdict.state]]
    out: list[Line] = [[*badge, ("  ", ""), (one_line(task, 200) if task else "(no task)", "bold")]]
    if verdict is not None:
        out.extend(liveness.explanation(verdict, status))
    run_id = doc.get("id")
    stamp_line: Line = [("id " + (str(run_id) if run_id is not None else "?"), "dim")]
    stamp_line.append((f" · started {doc.get('createdAt') or '?'}", "dim"))
    stamp_line.append((f" · updated {doc.get('updatedAt') or '?'}", "dim"))
    stamp_line += ran_segments(doc, now, verdict)
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
    units_raw = doc.get("units")
    if not isinstance(units_raw, dict) and units_raw is not None:
        out.append([("units    ", "dim"), (f"malformed (a JSON {type(units_raw).__name__})",
                                             "magenta")])
    return out


def ran_segments(doc: Mapping[str, Any], now: float, verdict: Verdict | None) -> Line:
    """How long it has been running, or how long it ran."""
    status = doc.get("status")
    created = parse_ts(doc.get("createdAt"))
    session = parse_ts(doc.get("sessionStartedAt"))
    if verdict is not None and not verdict.live:
        # Nothing works on it: its last session ran up to its last write, not up to now.
        ran = ran_seconds({**doc, "status": "stopped"}, now)
        return [(f" · ran {fmt_dur(ran)}", "dim")] if ran is not None else []
    if status in LIVE and session is not None:
        before = ran_seconds(doc, now, open_session=False)
        return [(f" · running for {fmt_dur(now - session)}"
                 + (f" (ran {fmt_dur(before)} before)" if before else ""), "dim")]
    if created is None:
        return []
    ran = ran_seconds(doc, now)
    if ran is not None:
        return [(f" · ran {fmt_dur(ran)}", "dim")]
    return [(f" · running for {fmt_dur(now - created)}", "dim")] if status in LIVE else []


def count_lines(doc: Mapping[str, Any], t: Tally, *, now: float, width: int, show_eta: bool) -> list[Line]:
    """The progress bar and the count of units in each state (and the ETA of a live view)."""
    bar_w = max(10, min(40, width - 34))
    chips: Line = [("         ", "")]
    for i, b in enumerate((*COUNT_ORDER, "interrupted", "malformed", "unknown", "removed")):
        n = t.counts.get(b, 0)
        if b not in COUNT_ORDER and n == 0:
            continue
        if i:
            chips.append((" · ", "dim"))
        style = UNIT_GLYPH.get(b, ("", "magenta"))[1] if n else "dim"
        chips.append((f"{COUNT_LABEL.get(b, b)} {n}", style))
    paced = None
    if show_eta and doc.get("status") in LIVE:
        e = eta(doc, t, now)
        chips.append((f"   ETA ≈ {fmt_dur(e)}" if e is not None else "   ETA —", "cyan"))
        paced = rate_line(doc, now)
    lines = [[("units    ", "dim"), *progress_bar(t.done, t.total, bar_w)], chips]
    if paced is not None:
        lines.append([("rate     ", "dim"), (paced, "cyan")])
    return lines


FAMILY_LIMIT: Final = 20


def runner_launched(doc: Mapping[str, Any]) -> bool:
    """Whether ``resumable run`` or ``submit`` made the run (its unit ids are the job's steps)."""
    launch = doc.get("launch")
    return isinstance(launch, dict) and launch.get("kind") == "resumable"


def family_lines(doc: Mapping[str, Any], t: Tally) -> list[Line]:
    """A line per family of steps (instances ``family+...`` of a run ``resumable run`` launched):
    its done/total and the count of each other state; the instances that need a human are detailed
    below with the others."""
    if not t.families or not runner_launched(doc):
        return []
    out: list[Line] = []
    pad = min(24, max(len(f) for f in t.families))
    for i, (name, counts) in enumerate(sorted(t.families.items(), key=lambda kv: t.family_order[kv[0]])):
        if i == FAMILY_LIMIT:
            out.append([(f"  … and {len(t.families) - FAMILY_LIMIT} more families", "dim")])
            break
        total = sum(n for b, n in counts.items() if b != "removed")
        done = counts.get("done", 0)
        line: Line = [("families " if i == 0 else "         ", "dim"), (name.ljust(pad), "bold"),
                      (f"  {done}/{total} done", "green" if done == total else "")]
        for b in (*COUNT_ORDER, "interrupted", "malformed", "unknown", "removed"):
            n = counts.get(b, 0)
            if n and b != "done":
                line.append((f" · {COUNT_LABEL.get(b, b)} {n}", UNIT_GLYPH.get(b, ("", "magenta"))[1]))
        out.append(line)
    return out


def attention_lines(doc: Mapping[str, Any], t: Tally, rs: Mapping[str, Any], *, now: float, detail_limit: int,
                    live_first: bool, store: tuple[str, str] | None,
                    whole: Mapping[str, Any] | None = None) -> list[Line]:
    """A detail line for each unit that needs a human (capped, with a count of the rest), and the
    units reconciled from commit trailers. ``whole``: those units' whole values, when ``doc``
    holds only their digests."""
    units_raw = doc.get("units")
    units: Mapping[str, Any] = whole if whole is not None else units_raw if isinstance(units_raw, dict) else {}
    roots: Mapping[str, str] = rs["dep_blocked"]
    # The live view leads with what is running (elapsed times tick there); a snapshot view leads
    # with what needs a human.
    order = ("in_progress", *(b for b in ATTENTION_ORDER if b != "in_progress")) if live_first \
        else ATTENTION_ORDER
    attention = [b for b in order if t.counts.get(b)]
    out: list[Line] = []
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
    for uid, note in t.reconciled[:RECONCILED_LIMIT]:
        # ulpi's words, verbatim: scripts grep for reconciled-from-trailer:<sha>.
        out.append([("  ↺ ", "cyan"), (uid, "bold"), (f"  {one_line(note, 120)}", "dim")])
    rest = t.reconciled_count - min(len(t.reconciled), RECONCILED_LIMIT)
    if rest > 0:
        out.append([(f"  … and {rest} more reconciled from commit trailers", "dim")])
    return out


def findings_lines(doc: Mapping[str, Any], open_list: list[Any]) -> list[Line]:
    """The open findings (the first few), how many were resolved, the validation and the result."""
    resolved = doc.get("resolvedItems")
    n_resolved = len(resolved) if isinstance(resolved, list) else 0
    out: list[Line] = [[("open     ", "dim"), (str(len(open_list)), "bold yellow" if open_list else ""),
                        (f"   resolved {n_resolved}", "dim")]]
    for item in open_list[:FINDINGS_LIMIT]:
        out.append(finding_line(item))
    if len(open_list) > FINDINGS_LIMIT:
        out.append([(f"  … and {len(open_list) - FINDINGS_LIMIT} more open findings", "dim")])
    fv = doc.get("finalValidation")
    req = " (required)" if doc.get("requireValidation") is True else ""
    if isinstance(fv, dict) and fv.get("status") in ("green", "red"):
        green = fv.get("status") == "green"
        # ulpi's words (`validation green` / `validation red`), which scripts grep for.
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
    return out


def footer(
    doc: Mapping[str, Any],
    *,
    file: str,
    here: str | None,
    rs: ResumeSet,
    open_count: int,
    tally_: Tally,
    verdict: Verdict | None = None,
    store: tuple[str, str] | None = None,
    check: JobCheck | None = None,
) -> list[Line]:
    """What to do next: converged, not resumable, or the exact resume command (and, for a live run
    nothing works on, what to do first). A done run whose job is out of date is not converged:
    the command that brings it up to date."""
    status = doc.get("status")
    if status == "done" and check is not None and check.state == "stale":
        return [[("→ bring it up to date: ", "bold"), (check.command, "bold cyan"),
                 (f"   ({check.to_run} step{'s' if check.to_run != 1 else ''} would run)", "dim")]]
    if status == "done" and check is not None and check.state == "unknown":
        return [[("✓ done", "bold green"), (": nothing to resume; whether its job is up to date is not known", "")]]
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
