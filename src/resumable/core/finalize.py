"""Whether a run may be finalized ``done``: every reason it may not, in ulpi's order. Pure.

``finalize done`` is fail-closed, as ulpi's checkpoint.mjs: units not done, blocked phases, required
phases not done, open findings, a pipeline's selected-scope coverage receipt that is absent or
invalid, and required final validation that is absent or red each refuse it.
"""

from __future__ import annotations

from resumable.core.model import list_of, phases_of, unit_status, units_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    Doc = Mapping[str, Any]


_SHA256_HEX = frozenset("0123456789abcdef")


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _SHA256_HEX


def _blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


def _scope_reasons(pipeline: Mapping[str, Any]) -> list[str]:
    """ulpi's selected-scope coverage receipt checks (its finalize rules 5 and 6)."""
    cov = pipeline.get("scopeCoverage")
    if not isinstance(cov, dict):
        return ["binding selected-scope coverage receipt is absent"]
    reasons: list[str] = []
    intake_ids: list[str] = []
    if _blank(pipeline.get("intakePath")):
        reasons.append("intakePath is blank")
    for key in ("intakeFileSha", "intakeScopeSha"):
        if not _is_sha256(pipeline.get(key)):
            reasons.append(f"{key} is not a valid sha256 binding")
    if _blank(pipeline.get("intakeSelection")):
        reasons.append("intakeSelection is blank")
    scope = pipeline.get("intakeScope")
    if not isinstance(scope, list) or not scope:
        reasons.append("intakeScope is empty")
    else:
        for entry in scope:
            eid = entry.get("id") if isinstance(entry, dict) else None
            if _blank(eid) or eid in intake_ids:
                reasons.append(f"intakeScope has a bad or duplicate id {eid!r}")
                continue
            assert isinstance(eid, str)
            intake_ids.append(eid)
            if _blank(entry.get("title")) or _blank(entry.get("source")):
                reasons.append(f"intakeScope entry {eid} lacks title/source")
    groups: dict[str, list[Any]] = {}
    for g in ("covered", "dropped", "uncovered"):
        value = cov.get(g)
        if not isinstance(value, list):
            reasons.append(f"scopeCoverage.{g} is not an array")
            value = []
        groups[g] = value
    seen: set[str] = set()
    for g, ids in groups.items():
        for rid in ids:
            if _blank(rid):
                reasons.append(f"scopeCoverage.{g} has a blank or non-string id")
            elif rid in seen:
                reasons.append(f"scopeCoverage id {rid} appears in two groups")
            else:
                seen.add(rid)
    total = cov.get("total")
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        reasons.append("scopeCoverage.total is not an integer >= 1")
    elif total != len(seen):
        reasons.append(f"scopeCoverage accounts for {len(seen)} of {total}")
    if intake_ids:
        for eid in intake_ids:
            if eid not in seen:
                reasons.append(f"intake id {eid} is absent from the coverage receipt")
        for rid in seen:
            if rid not in intake_ids:
                reasons.append(f"coverage receipt contains non-intake id {rid}")
        if isinstance(total, int) and total != len(intake_ids):
            reasons.append(f"scopeCoverage.total {total} != intake count {len(intake_ids)}")
    errors = cov.get("errors")
    if not isinstance(errors, list) or errors:
        reasons.append("scopeCoverage.errors is not an empty array")
    uncovered = [str(u) for u in groups["uncovered"]]
    if uncovered:
        reasons.append(f"{len(uncovered)} selected-scope item(s) UNCOVERED: {', '.join(uncovered)}")
    return reasons


def finalize_done_reasons(doc: Doc) -> list[str]:
    """Every reason ``finalize done`` must refuse (fail-closed), in ulpi's order."""
    reasons: list[str] = []
    not_done = [uid for uid, u in units_of(doc).items() if unit_status(u) != "done"]
    if not_done:
        reasons.append(f"{len(not_done)} unit(s) not done: {', '.join(not_done)}")
    phases = phases_of(doc)
    blocked = [p for p, v in phases.items() if isinstance(v, dict) and v.get("status") == "blocked"]
    if blocked:
        reasons.append(f"{len(blocked)} phase(s) blocked: {', '.join(blocked)}")
    required = [p for p in list_of(doc, "requiredPhases") if isinstance(p, str)]
    req_missing = [
        p for p in required if not (isinstance(phases.get(p), dict) and phases[p].get("status") == "done")
    ]
    if req_missing:
        reasons.append(f"{len(req_missing)} required phase(s) not done: {', '.join(req_missing)}")
    open_items = list_of(doc, "openItems")
    if open_items:
        reasons.append(f"{len(open_items)} open finding(s) in openItems")
    pipeline = doc.get("pipeline")
    if isinstance(pipeline, dict):
        reasons.extend(_scope_reasons(pipeline))
    if doc.get("requireValidation") is True:
        fv = doc.get("finalValidation")
        fv_status = fv.get("status") if isinstance(fv, dict) else None
        if fv_status is None:
            reasons.append("final validation is absent")
        elif fv_status != "green":
            reasons.append(f"final validation is {fv_status} (not green)")
    return reasons
