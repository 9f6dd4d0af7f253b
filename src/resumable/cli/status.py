"""``resumable status``: where runs stand. Read-only: never writes, locks or spawns anything."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import click

from resumable import store
from resumable.cli.completion import complete_run
from resumable.cli.errors import command_class, warn
from resumable.core import recipe
from resumable.core.text import escape_controls
from resumable.errors import UsageError
from resumable.view import discovery, liveness, workflow
from resumable.view import status as view
from resumable.view import watch as watching
from resumable.view.liveness import Verdict
from resumable.view.printer import Printer, dump_json
from resumable.view.status import Line

if TYPE_CHECKING:
    from resumable.core.types import RunDocument
    from resumable.store.backend import Backend, RunnerLease
    from resumable.store.values import RunEntry


@click.command("status", cls=command_class(), short_help="Show where runs stand (read-only).")
@click.argument("run", required=False, shell_complete=complete_run)
@click.option("--list", "list_", is_flag=True, help="One line per run, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print the document(s) as JSON.")
@click.option("--resume", is_flag=True, help="How to resume the run (with --json: a descriptor).")
@click.option("--dir", "runs_dir", metavar="DIR", default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")
@click.option("--no-color", is_flag=True, help="No colour (NO_COLOR is honoured too).")
@click.option("--watch", is_flag=True, help="Live view until the run ends or Ctrl-C.")
@click.option("--wait", "wait_for", metavar="DURATION", default=None,
              help="With --watch, on a run not running: wait this long for its next session (90s, 10m;"
                   " default until Ctrl-C; 0: do not wait).")
@click.option("--check", "check", is_flag=True,
              help="Exit 1 unless the run is done and up to date with its job (for CI).")
@click.option("--units", "units_state", metavar="STATE", default=None,
              help="List every unit in STATE (pending, running, done, failed, timeout, blocked, "
                   "dep_blocked, interrupted, malformed).")
@click.pass_context
def status_command(
    ctx: click.Context,
    run: str | None,
    list_: bool,
    as_json: bool,
    resume: bool,
    runs_dir: str | None,
    store_url: str | None,
    no_color: bool,
    watch: bool,
    wait_for: str | None,
    check: bool,
    units_state: str | None,
) -> None:
    """Show where a run stands (RUN: an id, an id prefix or a .json path; default the newest).

    A run that `resumable run` made from a job file that still exists is also checked against the
    job as the files are now: up to date, or how many steps `resumable run` would run, and why.
    With --check the command exits 1 unless the run is done and up to date."""
    check_options(list_=list_, as_json=as_json, resume=resume, watch=watch, units_state=units_state, check=check)
    until = _until(wait_for, watch)
    backend = store.open_backend(runs_dir, url=store_url)
    printer = Printer.for_stdout(no_color)
    now = time.time()

    if list_:
        list_runs(backend, printer, as_json=as_json, now=now)
        return

    # The plain view only counts a run's units and details a few: a large run's digests serve it.
    counted_only = not (watch or as_json or resume or units_state)
    picked = discovery.pick_run(backend, run, counted_only) if not watch or until == 0 else watching.await_run(
        lambda: discovery.pick_run(backend, run), until, printer, repr(run) if run else "of this project")
    if picked is None:
        no_run(ctx, backend, waited=watch and until != 0, as_json=as_json, check=check)
        return
    warn_also_matched(run, picked)
    entry = picked.entry
    location = os.path.abspath(entry.location) if entry.location.endswith(".json") else entry.location

    hint_store = discovery.store_option(backend)
    if resume:
        resume_view(backend, entry, printer, location=location, as_json=as_json, hint_store=hint_store)
        return

    if entry.doc is None:
        if as_json:
            printer.text(dump_json({"file": location, "error": entry.error}))
        raise discovery.unreadable(entry)
    doc = entry.doc

    show(ctx, backend, picked, doc, printer, as_json=as_json, units_state=units_state, watch=watch, until=until,
         check=check, hint_store=hint_store, now=now)


def show(ctx: click.Context, backend: Backend, picked: discovery.Picked, doc: RunDocument, printer: Printer, *,
         as_json: bool, units_state: str | None, watch: bool, until: float | None, check: bool,
         hint_store: tuple[str, str] | None, now: float) -> None:
    """The run's view: JSON, its units in one state, or the default view (``--watch``: live),
    with whether its job is up to date; ``--check``: exit 1 unless done and up to date."""
    entry = picked.entry
    live = workflow.read_workflow_status(workflow.project_root_for_runs_dir(backend.root))
    judged_job = job_check(doc) if not (watch or units_state) and (check or not as_json) else None
    passed = doc.get("status") == "done" and (judged_job is None or judged_job.ok)
    if as_json:
        overlay = workflow.overlay_json(live, doc)
        # The extra key only when there is a live workflow: otherwise the output is the document.
        printer.text(dump_json({**doc, workflow.JSON_KEY: overlay} if overlay is not None else doc))
        ctx.exit(1 if check and not passed else 0)
    if units_state is not None:
        printer.lines(view.render_units(doc, units_state, now))
        return
    here = os.getcwd()
    runs_line = found_walking_up(backend)
    lease = discovery.lease_of(backend, entry)
    judge = Rejudge(lease)

    def frame(d: RunDocument, t: float) -> list[Line]:
        shown = live is not None or claude_project(backend) or workflow.claude_launched(d)
        overlay = workflow.overlay_lines(live, d, t) if shown else []
        return view.render_status(d, file=entry.location, now=t, width=printer.layout_width, here=here,
                                  show_eta=watch, verdict=judge(d, t), overlay=overlay, runs_dir=runs_line,
                                  store=hint_store, detail=picked.detail if d is doc else None,
                                  check=judged_job if d is doc else None)

    if watch:
        try:
            ctx.exit(watch_fn(picked.handle, frame, printer, until))
        except KeyboardInterrupt:
            # Ctrl-C is how a watch normally ends: no traceback, the conventional 130.
            printer.text("")
            ctx.exit(130)
    printer.lines(frame(doc, now))
    if check and not passed:
        ctx.exit(1)


def no_run(ctx: click.Context, backend: Backend, *, waited: bool, as_json: bool, check: bool) -> None:
    """No run to show: after waiting for one in vain (``await_run`` said so), exit 1; else say
    there are none yet, which is no error (a fresh project simply has none), but is not done."""
    if waited:
        ctx.exit(1)
    click.echo(f"no runs yet under {backend.root}; start one with `resumable run` or `resumable init`", err=as_json)
    ctx.exit(1 if check else 0)


def job_check(doc: RunDocument) -> view.JobCheck | None:
    """Whether the run is up to date with its job as the files are now (``runner.freshness``);
    None for a run no ``resumable run`` or ``submit`` made, and for a live one (it is changing)."""
    launch = doc.get("launch")
    if doc.get("status") in view.LIVE or not isinstance(launch, dict) or launch.get("kind") != "resumable":
        return None
    argv, cwd = launch.get("argv"), launch.get("cwd")
    if not isinstance(argv, list) or len(argv) < 2 or not all(isinstance(a, str) for a in argv) \
            or argv[0] != "resumable" or argv[1] not in ("run", "submit") or not isinstance(cwd, str):
        return None
    from resumable.cli.run import launch_options
    from resumable.runner import freshness
    from resumable.runner.conclude import resume_hint

    command = resume_hint(launch)
    opts = launch_options(argv[1], argv[2:])
    if opts is None:
        return view.JobCheck("unknown", command=command, note="its launch command cannot be read")
    return freshness.judge(freshness.absolute(opts, cwd), command)


def warn_also_matched(run: str | None, picked: discovery.Picked) -> None:
    if picked.also_matched:
        warn(f"{run!r} also matches {', '.join(picked.also_matched[:5])}"
             f"{' …' if len(picked.also_matched) > 5 else ''}; showing {picked.entry.run_id}")


def found_walking_up(backend: Backend) -> str | None:
    """The line saying which runs directory the view is of, when it was found by walking up."""
    found = discovery.how_found(backend) or ""
    return f"{backend.root} ({found})" if found.startswith("found walking up") else None


def check_options(*, list_: bool, as_json: bool, resume: bool, watch: bool, units_state: str | None,
                  check: bool = False) -> None:
    """UsageError for options that do not go together, before anything is read."""
    if check and (list_ or watch or resume or units_state):
        raise UsageError("--check goes with the default view or --json, not --list, --watch, --resume or --units")
    if units_state is not None and units_state not in view.UNITS_STATES:
        raise UsageError(f"unknown unit state {units_state!r} for --units: use one of "
                         f"{', '.join(view.UNITS_STATES)}")
    if watch and (as_json or list_ or resume or units_state):
        raise UsageError("--watch shows the live view; it does not combine with "
                         "--json, --list, --resume or --units")
    if list_ and (resume or units_state):
        raise UsageError("--list does not combine with --resume or --units")


def list_runs(backend: Backend, printer: Printer, *, as_json: bool, now: float) -> None:
    """``--list``: one line per run, newest first (``--json``: their documents)."""
    entries = backend.list_runs()
    if as_json:
        printer.text(dump_json([
            e.doc if e.doc is not None else {"file": e.location, "error": e.error} for e in entries
        ]))
        return
    if not entries:
        printer.text(f"no runs yet under {backend.root}")
        return
    printer.text(escape_controls(f"{len(entries)} run{'s' if len(entries) != 1 else ''} under"
                                 f" {backend.description}, newest first"))
    printer.lines([view.list_line(e.name, e.doc, e.error, now, judged(backend, e)) for e in entries])


def resume_view(backend: Backend, entry: RunEntry, printer: Printer, *, location: str, as_json: bool,
                hint_store: tuple[str, str] | None) -> None:
    """``--resume``: how to resume the run (``--json``: the descriptor); an unreadable run fails."""
    verdict = None
    if entry.doc is None:
        desc = recipe.unreadable(location, entry.error or "unreadable")
    else:
        desc = recipe.classify(entry.doc, location, here=os.getcwd(), store=hint_store)
        verdict = judged(backend, entry)
    if as_json:
        printer.text(dump_json(desc))
    else:
        notes = None if verdict is None or entry.doc is None else \
            liveness.resume_notes(verdict, entry.doc, file=location, store=hint_store)
        lines = recipe.render_text(desc, entry.doc, location, notes=notes)
        printer.text("\n".join(escape_controls(line) for line in lines))
    if entry.doc is None:
        raise discovery.unreadable(entry)


def judged(backend: Backend, entry: RunEntry) -> Verdict | None:
    """The verdict on a listed run (``view.liveness``): only a live run is asked about."""
    if entry.doc is None or entry.doc.get("status") not in view.LIVE:
        return None
    return liveness.judge(entry.doc, discovery.lease_of(backend, entry))


class Rejudge:
    """The verdict of a watched run, asked again when its document changed or every few seconds
    (the store is asked, not the document: a runner or worker may come or go without a write)."""

    EVERY = 2.0

    def __init__(self, lease: RunnerLease | None) -> None:
        self.lease = lease
        self.last: tuple[tuple[object, object], float, Verdict | None] | None = None

    def __call__(self, doc: RunDocument, now: float) -> Verdict | None:
        key = (doc.get("updatedAt"), doc.get("status"))
        if self.last is None or self.last[0] != key or now - self.last[1] >= self.EVERY:
            self.last = (key, now, liveness.judge(doc, self.lease))
        return self.last[2]


def claude_project(backend: Backend) -> bool:
    """Whether this project is one Claude Code works in (then "no live workflow" is news)."""
    root = workflow.project_root_for_runs_dir(backend.root)
    return os.path.isdir(os.path.join(workflow.resolve_claude_dir(), "projects", workflow.project_slug(root)))


def watch_fn(handle: Any, frame: Any, printer: Printer, until: float | None = 0.0) -> int:
    """Indirection so tests can replace the watch loop without touching the command."""
    return watching.watch(handle, frame, printer, until)


def _until(wait_for: str | None, watch: bool) -> float | None:
    """--wait as a deadline on time.monotonic (None: until Ctrl-C; 0: no waiting)."""
    if wait_for is None:
        return None
    if not watch:
        raise UsageError("--wait goes with --watch")
    from resumable.runner.jobfile import parse_duration

    seconds = parse_duration(wait_for, "--wait")
    return 0.0 if seconds == 0 else time.monotonic() + seconds
