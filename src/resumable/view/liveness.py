"""Who works on a live run now, and the one verdict every reader gives about it: ``status``, its
``--list`` and ``--watch``, ``status --resume`` and ``doctor`` all ask ``judge``.

A run's document says "running" from its first write to its finish; whether anything still works on
it is asked of the store (``RunnerLease.holder`` and ``RunnerLease.workers``), never guessed from the
document: a runner or a durable script holds the run's lease while it lives, and workers hold
leases on the steps they claimed (the PostgreSQL store). A worker's lease outlives a killed worker
by up to its length; on this host its process is checked too, so a worker that is gone is not
called live.

The verdicts, for a run marked running or initializing:

- ``running``: a runner, a script or workers hold it (``holders`` names them and their steps);
- ``stopped``: started by ``resumable run``, and its runner is gone;
- ``unfinished``: opened by the Python API, and the script ended without ``run.finish()``;
- ``waiting``: its steps run on workers, and no live worker holds one (``holders``: workers on this
  host that died holding steps, until their leases expire).

Runs written by other tools (the low-level verbs, an agent) have no verdict: they are "running" while
their writer works, with no lease to ask.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resumable.core import recipe
from resumable.core.model import ACTIVE_RUN_STATES
from resumable.errors import ResumableError
from resumable.procfs import start_time
from resumable.view.units import tally

if TYPE_CHECKING:
    from resumable.store.backend import RunnerLease

RUNNING, STOPPED, UNFINISHED, WAITING = "running", "stopped", "unfinished", "waiting"


@dataclass(frozen=True, slots=True)
class Holder:
    """A process that works on the run: the runner or script holding its lease, or a worker."""

    role: str  # "runner", "script" or "worker"
    host: str
    pid: object  # as the store recorded it ("?" when it could not say)
    steps: tuple[str, ...]  # the steps it holds
    expires_in: float | None = None  # a worker's lease: seconds left

    def describe(self) -> str:
        who = f"{self.role} pid {self.pid} on {self.host}"
        if self.role == "worker" and not self.steps:
            return f"{who} (waiting for its next step)"
        return f"{who} ({', '.join(self.steps[:5])}{' …' if len(self.steps) > 5 else ''})" if self.steps else who


@dataclass(frozen=True, slots=True)
class Verdict:
    state: str
    launched_by: str  # recipe.launched_by: "runner", "submit" (workers), "script"
    holders: tuple[Holder, ...] = ()

    @property
    def live(self) -> bool:
        return self.state == RUNNING

    def summary(self) -> str:
        """One phrase for a listing: who works on it, or why nothing does."""
        if self.state == RUNNING:
            workers = [h for h in self.holders if h.role == "worker"]
            if workers:
                return f"{len(workers)} worker{'s' if len(workers) != 1 else ''}"
            return self.holders[0].describe() if self.holders else "running"
        return {STOPPED: "stopped: its runner is gone", UNFINISHED: "the script ended without run.finish()",
                WAITING: "waiting: no worker holds a step"}[self.state]


def judge(doc: Mapping[str, Any], lease: RunnerLease | None) -> Verdict | None:
    """The verdict on a live run (None: not live, not ours to judge, or the store cannot say)."""
    if doc.get("status") not in ACTIVE_RUN_STATES or lease is None:
        return None
    by = recipe.launched_by(doc)
    if by is None:
        return None
    try:
        claims = lease.workers()
        holder = lease.holder() if not claims else None
    except ResumableError:
        return None
    if claims is not None and by == "runner":
        by = "submit"  # `resumable run --store`: a submit and a worker, as any other worker runs it
    live: list[Holder] = []
    dead: list[Holder] = []
    for c in claims or []:
        h = Holder("worker", str(c.get("host", "?")), c.get("pid", "?"), tuple(c.get("steps") or ()),
                   c.get("expiresIn"))
        if h.steps:
            (dead if gone(h) else live).append(h)
        elif alive_here(h):
            live.append(h)  # holds nothing now (a retry's backoff), and its process is alive
    if live:
        return Verdict(RUNNING, by, tuple(live))
    if holder is not None:
        role = "script" if by == "script" else "runner"
        return Verdict(RUNNING, by, (Holder(role, str(holder.get("host", "?")), holder.get("pid", "?"),
                                            in_progress(doc)),))
    state = {"script": UNFINISHED, "submit": WAITING}.get(by, STOPPED)
    return Verdict(state, by, tuple(dead))


def _here(holder: Holder) -> bool:
    return holder.host == socket.gethostname() and isinstance(holder.pid, int)


def gone(holder: Holder) -> bool:
    """Whether a holder on this host is proven gone (its pid is not a live process)."""
    return _here(holder) and holder.pid != os.getpid() and start_time(holder.pid) is None


def alive_here(holder: Holder) -> bool:
    """Whether a holder is on this host and its process alive: the only proof for a worker that
    holds nothing (a registered worker that was killed never says so)."""
    return _here(holder) and not gone(holder)


def in_progress(doc: Mapping[str, Any]) -> tuple[str, ...]:
    units = doc.get("units")
    if not isinstance(units, dict):
        return ()
    return tuple(uid for uid, u in units.items() if isinstance(u, dict) and u.get("status") == "in_progress")


# ---- what the views say about it -----------------------------------------------------------------

Line = list[tuple[str, str]]  # as view.status: (text, rich style) segments

BADGES = {STOPPED: ("↯ STOPPED", "bold magenta"), UNFINISHED: ("↯ STOPPED", "bold magenta"),
          WAITING: ("◌ WAITING", "bold yellow")}
GLYPHS = {STOPPED: ("↯", "magenta"), UNFINISHED: ("↯", "magenta"), WAITING: ("◌", "yellow")}
WHY = {
    STOPPED: "its runner is not running: the run is marked {status} but nothing works on it; resume it with"
             " the command below",
    UNFINISHED: "the script ended without run.finish(): the run is marked {status} but nothing works on it;"
                " finish it (or run it again) with the lines below",
    WAITING: "no worker holds a step of it: the run is marked {status} but nothing works on it; start a worker"
             " with the command below",
}


def holders_line(verdict: Verdict) -> str:
    workers = [h for h in verdict.holders if h.role == "worker"]
    if workers and verdict.live:
        return f"{len(workers)} worker{'s' if len(workers) != 1 else ''}: " + " · ".join(
            h.describe().removeprefix("worker ") for h in workers)
    return ", ".join(h.describe() for h in verdict.holders)


def explanation(verdict: Verdict, status: object) -> list[Line]:
    """The lines under the badge: who works on the run, or why nothing does."""
    if verdict.live:
        return [[("held by  ", "dim"), (holders_line(verdict), "blue")]]
    out: list[Line] = [[(WHY[verdict.state].format(status=status), "magenta")]]
    for h in verdict.holders:  # workers on this host that died holding steps
        left = f"; its lease expires in {h.expires_in:.0f}s" if h.expires_in is not None else ""
        out.append([(f"  {h.describe()} is gone{left}, then another worker takes its steps back", "dim")])
    return out


def store_url_of(store: tuple[str, str] | None) -> str | None:
    return store[1] if store is not None and store[0] == "--store" else None


def next_step(verdict: Verdict, doc: Mapping[str, Any], *, file: str,
              store: tuple[str, str] | None) -> tuple[str, str] | None:
    """(what, command) to do before (or instead of) resuming: finish a script's run, start a worker."""
    if verdict.state == UNFINISHED:
        url = store_url_of(store)
        return "finish it", recipe.finish_line(doc, str(doc.get("id")) if url else os.path.abspath(file), url)
    if verdict.state == WAITING:
        return "start a worker", recipe.worker_line(doc.get("id"), store)
    return None


def footer(verdict: Verdict, doc: Mapping[str, Any], desc: Mapping[str, Any], set_line: str, *, file: str,
           store: tuple[str, str] | None) -> list[Line]:
    """The status view's last lines for a judged run: what to do next, as commands that paste."""
    shell = str(desc["shell"]) if desc.get("runnable") else None
    step = next_step(verdict, doc, file=file, store=store)
    left = tally(doc, keep=0).unreached if step is not None and verdict.state == UNFINISHED and shell else 0
    if step is not None and shell and left:
        # A map stopped half way: running the script again is what finishes it; finishing now would
        # leave its other items undone.
        return [[("→ run the script again: ", "bold"), (shell, "bold cyan"),
                 (f"   ({left} item(s) of a map not run yet; {set_line})", "dim")],
                [(f"  or {step[0]}: ", "bold"), (step[1], "cyan")]]
    if step is not None:
        out: list[Line] = [[(f"→ {step[0]}: ", "bold"), (step[1], "bold cyan")]]
        argv = desc.get("argv") or []
        again = "run the script again" if verdict.state == UNFINISHED else "re-run"
        if shell and (verdict.state == UNFINISHED or argv[1:2] == ["run"]):
            out.append([(f"  or {again}: ", "bold"), (shell, "cyan"), (f"   ({set_line})", "dim")])
        return out
    if shell is None:
        return [[("→ not runnable as a command", "bold yellow"),
                 (f" ({desc.get('kind')}: {desc.get('reason')}); {set_line}", "dim")]]
    prefix = "running; once it stops, resume" if verdict.live else "resume"
    return [[(f"→ {prefix}: ", "bold"), (shell, "bold cyan"), (f"   ({set_line})", "dim")]]


def resume_notes(verdict: Verdict, doc: Mapping[str, Any], *, file: str, store: tuple[str, str] | None
                 ) -> list[str]:
    """The comment lines `status --resume` prints about a live run (``recipe.render_text``)."""
    run, status = doc.get("id"), doc.get("status")
    if verdict.live:
        return [f"# run {run} is {status} ({holders_line(verdict)}): resume only once it has stopped"]
    why = {STOPPED: "its runner is gone", UNFINISHED: "the script ended without run.finish()",
           WAITING: "no worker holds a step of it"}[verdict.state]
    out = [f"# run {run} is marked {status}, but {why}"]
    step = next_step(verdict, doc, file=file, store=store)
    if step is not None:
        out += [f"# {step[0]}:", f"#   {step[1]}"]
    return out
