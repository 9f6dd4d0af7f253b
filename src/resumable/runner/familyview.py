"""A plan's decisions as people read them: an ordinary step a line, a family of steps one line with
its counts (``run   clean: 2 of 8 instances (never ran ×2); 6 skip (done)``), and under it a line
for each instance that runs because it failed, timed out or was interrupted last time (capped).
Used by ``--dry-run``, ``--explain FAMILY`` and the runner's opening lines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from resumable.core.instance import family_of, is_instance

if TYPE_CHECKING:
    from resumable.runner.explain import Decision

EXPANDED_LIMIT = 10  # instance lines under a family, at most
_TROUBLE = ("failed last time", "timed out last time", "interrupted last time", "was blocked by a failed step")
_NAMED = 3  # instances named in a family's line when only a few of them run


def grouped(decisions: Mapping[str, Decision]) -> list[tuple[str, list[Decision]]]:
    """(a step id or a family name, its decisions), in the job's order (a family where its first
    instance is)."""
    order: list[tuple[str, list[Decision]]] = []
    at: dict[str, list[Decision]] = {}
    for sid, d in decisions.items():
        fam = family_of(sid)
        if fam is None:
            order.append((sid, [d]))
            continue
        group = at.get(fam)
        if group is None:
            group = at[fam] = []
            order.append((fam, group))
        group.append(d)
    return order


def has_families(ids: Iterable[str]) -> bool:
    return any(map(is_instance, ids))


def _head(reason: str) -> str:
    """What a reason says, without the file or step it names: ``input changed``, ``never ran``."""
    cut = min((i for i in (reason.find(":"), reason.find(" (")) if i > 0), default=len(reason))
    return reason[:cut]


def _reasons(ds: list[Decision], name_them: bool = False) -> str:
    """Why: each instance's own reason when they are few and named, else the reason they share,
    else each kind of reason with its count."""
    if name_them:
        return "; ".join(f"{d.step}: {d.reason}" for d in ds)
    if len({d.reason for d in ds}) == 1:
        return ds[0].reason
    counts: dict[str, int] = {}
    for d in ds:
        head = _head(d.reason)
        counts[head] = counts.get(head, 0) + 1
    parts = [f"{head} ×{n}" if n > 1 else head for head, n in counts.items()]
    return ", ".join(parts[:4]) + (", …" if len(parts) > 4 else "")


def family_line(name: str, ds: list[Decision]) -> str:
    """One line for a family's decisions."""
    runs = [d for d in ds if d.run]
    skips = [d for d in ds if not d.run]
    total = len(ds)
    plural = "s" if total != 1 else ""
    if not runs:
        return f"skip  {name}: {total} instance{plural} ({_reasons(skips)})"
    named = len(runs) <= _NAMED and len(runs) < total
    line = f"run   {name}: {len(runs)} of {total} instance{plural} ({_reasons(runs, named)})"
    if skips:
        line += f"; {len(skips)} skip ({_reasons(skips)})"
    return line


def trouble(ds: list[Decision]) -> list[Decision]:
    """The instances that run because something went wrong last time."""
    return [d for d in ds if d.run and d.reason.startswith(_TROUBLE)]


def lines(decisions: Mapping[str, Decision]) -> list[str]:
    """The decisions, a family a line (and its troubled instances under it)."""
    out: list[str] = []
    for name, ds in grouped(decisions):
        if len(ds) == 1 and ds[0].step == name:
            out.append(ds[0].line())
            continue
        out.append(family_line(name, ds))
        bad = trouble(ds)
        for d in bad[:EXPANDED_LIMIT]:
            out.append(f"      {d.line()}")
        if len(bad) > EXPANDED_LIMIT:
            out.append(f"      … and {len(bad) - EXPANDED_LIMIT} more ({name}: `resumable run --explain {name}`)")
    return out


def explain_family(name: str, decisions: Mapping[str, Decision]) -> list[str]:
    """``--explain FAMILY``: its line, then every instance that runs (the skipped ones counted)."""
    ds = [d for sid, d in decisions.items() if family_of(sid) == name]
    out = [family_line(name, ds)]
    out.extend(f"      {d.line()}" for d in ds if d.run)
    return out


def done_lines(ids: list[str]) -> list[str]:
    """The lines of a dry run that skips every one of ``ids`` as done (the kept answer's)."""
    if not has_families(ids):
        return [f"skip  {sid}: done" for sid in ids]
    from resumable.runner.explain import Decision

    return lines({sid: Decision(sid, False, "done") for sid in ids})
