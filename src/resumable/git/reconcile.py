"""Trust git over the checkpoint: ulpi's autonomous-pipeline Task-Id reconciliation.

For each selected unit, against the task ids integrated in ``ref`` (``log.integrated_task_ids``):

    reachable   done?  action
    yes         no     unit -> done, note ``reconciled-from-trailer:<sha>``     (reconciled)
    yes         yes    nothing                                                  (already done)
    no          yes    open blocker item ``stale-done:<id>``; the unit stays done (staleDone)
    no          no     nothing                                                  (runnable)

Planning is pure (``plan``); ``apply`` performs the plan through any writer with ``unit`` and
``item`` methods, such as ``resumable.api.Run``. A done unit is never demoted (the store refuses
that); the open blocker is what stops a stale done from being finalized. As in ulpi's pipeline, a selected
id that is not yet a unit of the run is treated as not done, so an integrated one is created done.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from resumable.errors import UsageError

NOTE_PREFIX = "reconciled-from-trailer:"


class ReconcileWriter(Protocol):
    """What ``apply`` needs of a run; ``resumable.api.Run`` has both methods."""

    def unit(self, unit_id: str, state: str, *, note: str | None = None) -> None: ...

    def item(self, items: object) -> object: ...


@dataclass(frozen=True)
class ReconcilePlan:
    ref: str
    integrated: Mapping[str, str]  # every reachable task id -> its newest commit, newest first
    reconciled: tuple[str, ...] = ()
    stale_done: tuple[str, ...] = ()
    runnable: tuple[str, ...] = ()
    already_done: tuple[str, ...] = ()
    # The writes, in selection order: ("unit", id, note) or ("item", id, blocker object).
    writes: tuple[tuple[str, str, Any], ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def summary(self) -> dict[str, list[str]]:
        """ulpi's result: ``{integrated, reconciled, staleDone, runnable}``."""
        return {"integrated": list(self.integrated), "reconciled": list(self.reconciled),
                "staleDone": list(self.stale_done), "runnable": list(self.runnable)}


def stale_done_item(unit_id: str, ref: str) -> dict[str, str]:
    return {
        "id": f"stale-done:{unit_id}",
        "kind": "stale-done",
        "severity": "blocker",
        "issue": f"unit {unit_id} is marked done but no commit is reachable from {ref} — "
                 "stale/lost integration; not trusted",
    }


def parse_units_arg(text: str) -> list[str]:
    """``--units a,b`` -> ``["a", "b"]``; an empty piece is a usage error."""
    ids = [p.strip() for p in text.split(",")]
    if not ids or any(not p for p in ids):
        raise UsageError(f"--units {text!r}: give comma-separated unit ids, e.g. --units build,test")
    return ids


def select_units(doc: Mapping[str, Any], units: Sequence[str] | None = None, *, all_units: bool = False) -> list[str]:
    """The ids to reconcile: ``units`` (deduplicated, in order), or every unit of the run when
    ``units`` is None (``--all``, also the default)."""
    if units is not None and all_units:
        raise UsageError("give --units a,b or --all, not both")
    if units is None:
        raw = doc.get("units")
        return list(raw) if isinstance(raw, dict) else []
    if isinstance(units, str):
        units = parse_units_arg(units)
    if not units:
        raise UsageError("--units needs at least one unit id")
    return list(dict.fromkeys(units))


def _open_item(doc: Mapping[str, Any], item_id: str) -> object:
    items = doc.get("openItems")
    if isinstance(items, list):
        for it in items:
            if isinstance(it, dict) and it.get("id") == item_id:
                return it
    return None


def plan(
    doc: Mapping[str, Any],
    integrated: Mapping[str, str],
    ref: str,
    units: Sequence[str] | None = None,
    *,
    all_units: bool = False,
    warnings: Sequence[str] = (),
) -> ReconcilePlan:
    """Decide, without writing, what reconciling ``doc`` against ``integrated`` does."""
    raw_units = doc.get("units")
    known: Mapping[str, Any] = raw_units if isinstance(raw_units, dict) else {}
    reconciled: list[str] = []
    stale: list[str] = []
    runnable: list[str] = []
    already: list[str] = []
    writes: list[tuple[str, str, Any]] = []
    for uid in select_units(doc, units, all_units=all_units):
        unit = known.get(uid)
        is_done = isinstance(unit, dict) and unit.get("status") == "done"
        sha = integrated.get(uid)
        if sha is not None:
            if is_done:
                already.append(uid)
            else:
                reconciled.append(uid)
                writes.append(("unit", uid, NOTE_PREFIX + sha))
        elif is_done:
            stale.append(uid)
            item = stale_done_item(uid, ref)
            current = _open_item(doc, item["id"])
            # Re-recording an identical open blocker would only add a journal record per run.
            if not (isinstance(current, dict) and all(current.get(k) == v for k, v in item.items())):
                writes.append(("item", uid, item))
        else:
            runnable.append(uid)
    return ReconcilePlan(ref=ref, integrated=dict(integrated), reconciled=tuple(reconciled),
                         stale_done=tuple(stale), runnable=tuple(runnable), already_done=tuple(already),
                         writes=tuple(writes), warnings=tuple(warnings))


def apply(the_plan: ReconcilePlan, writer: ReconcileWriter, *, dry_run: bool = False) -> dict[str, list[str]]:
    """Perform the plan's writes in order (none with ``dry_run``); returns ulpi's summary."""
    if not dry_run:
        for kind, uid, payload in the_plan.writes:
            if kind == "unit":
                writer.unit(uid, "done", note=payload)
            else:
                writer.item(payload)
    return the_plan.summary()


def reconcile(
    doc: Mapping[str, Any],
    repo: str | os.PathLike[str],
    ref: str,
    units: Sequence[str] | None = None,
    *,
    all_units: bool = False,
    run_id: str | None = None,
    allow_missing_ref: bool = False,
) -> ReconcilePlan:
    """Read git and plan: ``integrated_task_ids`` then ``plan`` (real git, read-only)."""
    from resumable.git.log import integrated_task_ids, is_shallow

    select_units(doc, units, all_units=all_units)  # usage errors before git runs
    integrated = integrated_task_ids(repo, ref, run_id, allow_missing_ref=allow_missing_ref)
    warnings = []
    if is_shallow(repo):
        warnings.append(f"{os.fspath(repo)} is a shallow clone: a unit integrated before its cut looks "
                        "stale-done (run `git fetch --unshallow`)")
    return plan(doc, integrated, ref, units, all_units=all_units, warnings=warnings)
