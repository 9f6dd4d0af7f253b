"""Read tools about whole runs: the list, one run's summary (what failed, why, and the exact command
that resumes it), and the resume set.

The summary answers "what failed and how do I resume" in one call: each failed unit with its exit
code, note and the last lines of its log, and the resume command from the same recipes
``resumable status --resume`` prints (``core.recipe``), always naming the store, so it pastes
anywhere. Everything counted is counted from a large run's digests where the store keeps them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from resumable.core import recipe
from resumable.core.stamps import parse_stamp
from resumable.mcp import answers
from resumable.mcp.answers import clip, clip_list
from resumable.mcp.bound import BoundStore, bounded, lease_verdict
from resumable.view.units import last_attempt, tally

if TYPE_CHECKING:
    from resumable.view.discovery import Picked

# Units detailed in a summary (failed first), and the findings shown.
FAILURES_SHOWN = 5
FINDINGS_SHOWN = 5
PHASES_SHOWN = 20
# The states a summary details, in the order a triager reads them.
TROUBLE = ("failed", "timeout", "blocked", "interrupted", "malformed", "unknown")


def age(doc: Mapping[str, Any], now: float) -> float | None:
    """Seconds since the run was last written (None: no stamp)."""
    when = parse_stamp(doc.get("updatedAt")) or parse_stamp(doc.get("createdAt"))
    return None if when is None else round(max(0.0, now - when), 1)


def counts_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    t = tally(doc, keep=0)
    return {"total": t.total, "done": t.done, "by_state": dict(sorted(t.counts.items()))}


def list_runs(bound: BoundStore, cursor: str | None = None, limit: int = 20) -> dict[str, Any]:
    """Every run, newest first: status, counts and age, a page at a time."""
    limit = bounded(limit, "limit", 1, 200)
    query = answers.query_key("list_runs")
    state = answers.read_cursor(cursor, query)
    start = answers.cursor_int(state, "i") if state else 0
    now = bound.now()
    entries = bound.backend.list_runs()

    def shape(entry: Any) -> dict[str, Any]:
        doc = entry.doc
        if doc is None:
            return {"id": entry.run_id, "error": clip(entry.error)}
        item: dict[str, Any] = {"id": entry.run_id, "status": doc.get("status"), "task": clip(doc.get("task"), 120),
                                **counts_of(doc), "updatedAt": doc.get("updatedAt"), "age_seconds": age(doc, now)}
        return item

    page = answers.Page(limit)
    taken, more = answers.fill(page, entries[start:], shape)
    out: dict[str, Any] = {"store": bound.backend.root, "runs": page.items, "count": len(entries)}
    if more:
        out["next_cursor"] = answers.make_cursor(query, {"i": start + taken})
    return out


def failure(bound: BoundStore, handle: Any, uid: str, unit: object) -> dict[str, Any]:
    """What a triager needs about one unit that is not done: how it ended, why, its log's last lines."""
    from resumable.mcp import logs

    if not isinstance(unit, dict):
        return {"unit": uid, "status": "malformed", "value": clip(answers.dumps(unit), 200)}
    att = last_attempt(unit)
    item: dict[str, Any] = {"unit": uid, "status": unit.get("status")}
    attempts = unit.get("attempts")
    if isinstance(attempts, list) and attempts:
        item["attempts"] = len(attempts)
    code = att.get("exitCode") if att else unit.get("lastExitCode")
    if code is not None:
        item["exitCode"] = code
    for key in ("note", "reason"):
        value = (att.get(key) if att else None) or unit.get(key)
        if value:
            item[key] = clip(value, 200)
    log = (att.get("log") if att else None) or unit.get("log")
    if isinstance(log, str) and log:
        item["log"] = clip(log, 300)
    tail = logs.summary_tail(bound, handle, uid, unit)
    if tail:
        item["logTail"] = tail
    return item


def resume_of(bound: BoundStore, doc: Mapping[str, Any], location: str, rs: Any) -> dict[str, Any]:
    """How to resume: the recipe's command (naming this store) or why there is none, and the set."""
    file = os.path.abspath(location) if location.endswith(".json") else location
    desc: Mapping[str, Any] = recipe.classify(doc, file, here=None, rs=rs, store=bound.option)
    out: dict[str, Any] = {"runnable": bool(desc.get("runnable")), "kind": desc.get("kind")}
    if desc.get("runnable"):
        out["command"] = clip(desc.get("shell"), 2000)
    else:
        out["reason"] = clip(desc.get("reason"))
    out["skip"] = len(rs["skip"])
    out["eligible"] = len(rs["eligible"])
    out["dep_blocked"] = len(rs["dep_blocked"])
    out["eligible_first"] = clip_list(list(rs["eligible"][:10]), 10)
    return out


def next_hint(doc: Mapping[str, Any], resume: Mapping[str, Any], verdict: Any) -> str:
    """One sentence: what to do next."""
    status = doc.get("status")
    if status == "done":
        return "done: every unit converged; nothing to resume"
    if status == "aborted":
        return "aborted: not meant to be resumed"
    if verdict is not None and verdict.live:
        return f"being worked on ({verdict.summary()}): wait, and ask again; resume only once it stops"
    if resume.get("runnable"):
        return f"resume with the command in resume.command (it skips the {resume['skip']} done units)"
    return (f"no command resumes it ({resume.get('reason')}); work through the eligible units (resume_set)"
            " with the unit tool, then finalize")


def run_summary(bound: BoundStore, run: str | None = None) -> dict[str, Any]:
    """One run (default: the newest): status, counts, what failed and why, how to resume."""
    picked: Picked = bound.pick(run, digests=True)
    doc = picked.entry.doc
    assert doc is not None
    now = bound.now()
    t = tally(doc, keep=FAILURES_SHOWN)
    trouble = [uid for b in TROUBLE for uid in t.first.get(b, [])][:FAILURES_SHOWN]
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)
    whole = picked.detail(trouble) if picked.detail is not None else {u: units.get(u) for u in trouble}
    rs = recipe.resume_set(doc)
    resume = resume_of(bound, doc, picked.entry.location, rs)
    verdict = lease_verdict(bound, picked)
    out: dict[str, Any] = {
        "id": picked.entry.run_id, "status": doc.get("status"), "task": clip(doc.get("task")),
        "createdAt": doc.get("createdAt"), "updatedAt": doc.get("updatedAt"), "age_seconds": age(doc, now),
        **counts_of(doc),
    }
    if doc.get("currentPhase") is not None:
        out["currentPhase"] = clip(doc.get("currentPhase"), 100)
    phases = doc.get("phases")
    if isinstance(phases, dict) and phases:
        shown = list(phases.items())[:PHASES_SHOWN]
        out["phases"] = {clip(k, 100): (v.get("status") if isinstance(v, dict) else "malformed") for k, v in shown}
        if len(phases) > PHASES_SHOWN:
            out["phases_more"] = len(phases) - PHASES_SHOWN
    if verdict is not None:
        out["live"] = {"state": verdict.state, "who": clip(verdict.summary(), 200)}
    out["failed"] = [failure(bound, picked.handle, uid, whole.get(uid)) for uid in trouble]
    more = sum(t.counts.get(b, 0) for b in TROUBLE) - len(trouble)
    if more > 0:
        out["failed_more"] = f"{more} more; list them with list_units (state failed, timeout, blocked...)"
    out.update(findings(doc))
    out["resume"] = resume
    out["next"] = clip(next_hint(doc, resume, verdict), 600)
    started = bound.started.get(picked.entry.run_id)
    if started is not None:
        out["started_here"] = started.describe()
    return fit(out)


def fit(out: dict[str, Any]) -> dict[str, Any]:
    """The summary within the answer's limit: log tails go first (tail_log reads them), then the
    findings' detail (list them by reading the run)."""
    for failed in reversed(out["failed"]):
        if answers.size(out) <= answers.ANSWER_LIMIT - 500:
            break
        if failed.pop("logTail", None) is not None:
            failed["logTail_dropped"] = "too long for one answer: read it with tail_log"
    if answers.size(out) > answers.ANSWER_LIMIT - 500:
        out.pop("findings_first", None)
    return out


def findings(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The open findings (the first few, clipped), the validation and the result."""
    out: dict[str, Any] = {}
    open_items = doc.get("openItems")
    items = open_items if isinstance(open_items, list) else []
    out["open_findings"] = len(items)
    if items:
        out["findings_first"] = [clip(answers.dumps(i), 200) if not isinstance(i, dict)
                                 else {clip(k, 40): clip(v if isinstance(v, str) else answers.dumps(v), 120)
                                       for k, v in list(i.items())[:5]}
                                 for i in items[:FINDINGS_SHOWN]]
    fv = doc.get("finalValidation")
    if isinstance(fv, dict):
        out["validation"] = clip(fv.get("status"), 20)
    if doc.get("result") is not None:
        out["result"] = clip(doc.get("result"))
    return out


def resume_set(bound: BoundStore, run: str, cursor: str | None = None, limit: int = 200) -> dict[str, Any]:
    """What a resume skips and re-runs: counts, then the eligible units and the dep-blocked ones (with
    the unit each waits on), a page at a time."""
    limit = bounded(limit, "limit", 1, 1000)
    view = bound.view(run)
    rid = view.run_id
    query = answers.query_key("resume_set", run=rid)
    state = answers.read_cursor(cursor, query)
    start = answers.cursor_int(state, "i") if state else 0
    rs = view.memo("resume_set", lambda: recipe.resume_set(view.doc))

    def listing() -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = [(u, None) for u in rs["eligible"]]
        return out + [(u, root) for u, root in rs["dep_blocked"].items()]

    listed = view.memo("resume_list", listing)
    page = answers.Page(limit)
    taken, more = answers.fill(page, listed[start:], lambda p: {"unit": clip(p[0], 256)} if p[1] is None
                               else {"unit": clip(p[0], 256), "waits_on": clip(p[1], 256)})
    out: dict[str, Any] = {"id": rid, "skip": len(rs["skip"]), "eligible": len(rs["eligible"]),
                           "dep_blocked": len(rs["dep_blocked"]), "units": page.items}
    if more:
        out["next_cursor"] = answers.make_cursor(query, {"i": start + taken})
    return out


def watch_run(bound: BoundStore, run: str, timeout: int = 30) -> dict[str, Any]:
    """Wait until the run changes (at most ``timeout`` seconds), then its summary; at once for a run
    nothing works on (neither live nor started by this server and still running). A run this server
    has just started may not exist yet: it is waited for."""
    from resumable.errors import NoRunError
    from resumable.mcp.bound import run_id
    from resumable.view.status import LIVE

    timeout = bounded(timeout, "timeout", 0, 300)
    rid = run_id(run)
    with bound.lock:
        started = bound.started.get(rid)
        handle = bound.backend.open(rid)
        exists = handle.exists()
        if not exists and started is None:
            raise NoRunError(f'no run matches "{rid}" under {bound.backend.root} (list_runs shows the runs)')
        token = handle.change_token()
        status = handle.read().get("status") if exists else None
        working = status in LIVE or (started is not None and started.proc.poll() is None)
    changed = working and timeout > 0 and _wait(bound, rid, token, float(timeout), started)
    with bound.lock:
        if not handle.exists():
            assert started is not None
            return {"id": rid, "status": "not started yet", "changed": False, "started_here": started.describe(),
                    "next": "the runner has not written the run yet: watch again, or read its output (tail_log"
                            " without a step)"}
        out = run_summary(bound, rid)
    out["changed"] = bool(changed)
    return fit(out)


def _wait(bound: BoundStore, rid: str, token: object, timeout: float, started: Any) -> bool:
    """Whether the run changed within ``timeout`` seconds; a runner this server started that ends
    meanwhile ends the wait too (its run may be finished without a further write)."""
    import time

    waiter = bound.backend.open(rid)  # its own handle: the wait holds no lock other tools need
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            slice_ = min(left, 0.5) if started is not None else left
            if waiter.wait_for_change(token, slice_) != token:
                return True
            if started is not None and started.proc.poll() is not None:
                return False
    finally:
        waiter.close()
