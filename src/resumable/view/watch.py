"""`resumable status`: the read-only status reader (the seed's run-status.mjs, and a live view).

It never writes, never locks and never spawns a process: a reader that did any of those could
disturb the run it is looking at (a lock probe can make a starting runner think another one is
live). The runs directory is byte-identical after any read.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import click

from resumable.core import recipe
from resumable.errors import CorruptRunError, ResumableError, UsageError
from resumable.store.files import journal
from resumable.view import discovery
from resumable.view import status as view
from resumable.view.status import Line

WATCH_INTERVAL = 0.5  # seconds between two stats of the run's files while watching
TICK = 1.0  # re-render this often even without a change, so elapsed times move


class OneLineError(click.ClickException):
    """A user error as the contract wants it: `resumable: <message>` on one line, its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(" ".join(message.split()))
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it a ClassVar

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"resumable: {self.message}", err=True)


class ReaderCommand(click.Command):
    """A click command whose failures end as one line and the contract's exit code.

    click's own usage errors exit 2 with a multi-line usage block, and 2 means "refused" here;
    a ResumableError escaping a subcommand would print a traceback. Both become OneLineError."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise OneLineError(f"{self.name}: {exc.format_message()}", 1) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ResumableError as exc:
            raise OneLineError(str(exc), exc.exit_code) from exc


class Printer:
    """Prints view lines: plain for pipes and NO_COLOR, through rich on a colour terminal."""

    def __init__(self, out: IO[str], *, color: bool, width: int | None) -> None:
        self.out = out
        self.color = color
        self.width = width  # None: not a terminal, never truncate
        self._console: Any = None

    @classmethod
    def for_stdout(cls, no_color: bool) -> Printer:
        out: IO[str] = sys.stdout
        tty = out.isatty()
        color = tty and not no_color and not os.environ.get("NO_COLOR")
        width = shutil.get_terminal_size((100, 24)).columns if tty else None
        return cls(out, color=color, width=width)

    @property
    def layout_width(self) -> int:
        return self.width or 100

    def texts(self, lines: Sequence[Line]) -> list[Any]:
        from rich.text import Text

        return [Text.assemble(*line, no_wrap=True, overflow="ellipsis") for line in lines]

    def console(self) -> Any:
        if self._console is None:
            # Lazy: rich costs ~60 ms to import, paid only when colour is actually drawn.
            from rich.console import Console

            self._console = Console(file=self.out, force_terminal=True, width=self.width,
                                    highlight=False, markup=False, emoji=False)
        return self._console

    def lines(self, lines: Sequence[Line]) -> None:
        if self.color:
            console = self.console()
            for text in self.texts(lines):
                console.print(text)
            return
        w = self.width
        chunks = []
        for line in lines:
            s = view.plain(line)
            if w is not None and len(s) > w:
                s = s[: max(1, w - 1)] + "…"
            chunks.append(s)
        self.out.write("\n".join(chunks) + "\n")
        self.out.flush()

    def text(self, s: str) -> None:
        self.out.write(s if s.endswith("\n") else s + "\n")
        self.out.flush()


def dump_json(value: object) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def journal_path(path: Path) -> Path:
    return path.with_name(path.stem + ".journal.jsonl")


class _JournalEnd:
    """Where a journal's records end, followed cheaply from poll to poll. Records are written
    over the journal's zero padding, so its size does not move, and its mtime moves in coarse
    clock ticks that two commits can share: the end of the records is what surely moves."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ino = -1
        self.end = 0

    def __call__(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return -1
        try:
            st = os.fstat(fd)
            if st.st_ino != self.ino or st.st_size < self.end:
                self.ino, self.end = st.st_ino, 0  # replaced or cut back: find the end afresh
            data = journal.read_to_padding(lambda offset, n: os.pread(fd, n, offset), self.end,
                                           st.st_size)
            zero = data.find(b"\0")
            self.end += zero if zero >= 0 else len(data)
            return self.end
        except OSError:
            return -1
        finally:
            os.close(fd)


def _signature(path: Path, journal_end: _JournalEnd) -> tuple[int, ...]:
    """What changes when a writer commits: size and mtime of the snapshot and the journal, and
    where the journal's records end."""
    sig: list[int] = []
    for p in (path, journal_path(path)):
        try:
            st = p.stat()
            sig += [st.st_size, st.st_mtime_ns, st.st_ino]
        except OSError:
            sig += [-1, -1, -1]
    sig.append(journal_end())
    return tuple(sig)


def watch(
    path: Path,
    frame: Callable[[dict[str, Any], float], list[Line]],
    printer: Printer,
    *,
    interval: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> int:
    """Re-render as the run's files change, until the run leaves running/initializing.

    One stat pair per interval is the whole cost of waiting; the document is re-read only when a
    size or mtime moved. On a terminal the frame is redrawn in place (rich Live) and ticks every
    second so elapsed times move; into a pipe a new frame is printed only on a change."""
    if interval is None:
        interval = WATCH_INTERVAL
    doc = discovery.load_doc(path)
    journal_end = _JournalEnd(journal_path(path))
    sig = _signature(path, journal_end)
    warning: str | None = None

    def lines() -> list[Line]:
        out = frame(doc, clock())
        if warning:
            out.append([(f"(last re-read failed: {warning}; showing the previous state)",
                         "yellow")])
        return out

    def ended() -> bool:
        return doc.get("status") not in view.LIVE

    if not printer.color:
        printer.lines(lines())
        while not ended():
            sleep(interval)
            new = _signature(path, journal_end)
            if new == sig:
                continue
            sig = new
            try:
                doc, warning = discovery.load_doc(path), None
            except ResumableError as exc:
                # A half-written external edit, or the file moved away mid-watch (gc): keep the
                # last good state and say so; the next change is read again.
                warning = str(exc)
            printer.text(f"── {time.strftime('%H:%M:%S', time.localtime(clock()))} ──")
            printer.lines(lines())
        return 0

    from rich.console import Group
    from rich.live import Live

    console = printer.console()
    with Live(Group(*printer.texts(lines())), console=console, auto_refresh=False,
              transient=False) as live:
        last_draw = clock()
        while not ended():
            sleep(interval)
            new = _signature(path, journal_end)
            changed = new != sig
            if changed:
                sig = new
                try:
                    doc, warning = discovery.load_doc(path), None
                except ResumableError as exc:
                    warning = str(exc)
            if changed or clock() - last_draw >= TICK:
                live.update(Group(*printer.texts(lines())), refresh=True)
                last_draw = clock()
    return 0


@click.command("status", cls=ReaderCommand, short_help="Show where runs stand (read-only).")
@click.argument("run", required=False)
@click.option("--list", "list_", is_flag=True, help="One line per run, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print the document(s) as JSON.")
@click.option("--resume", is_flag=True, help="How to resume the run (with --json: a descriptor).")
@click.option("--dir", "runs_dir", type=click.Path(file_okay=False), default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--no-color", is_flag=True, help="No colour (NO_COLOR is honoured too).")
@click.option("--watch", is_flag=True, help="Live view until the run ends or Ctrl-C.")
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
    no_color: bool,
    watch: bool,
    units_state: str | None,
) -> None:
    """Show where a run stands (RUN: an id, an id prefix or a .json path; default the newest).

    Read-only: never writes, locks or spawns anything."""
    if units_state is not None and units_state not in view.UNITS_STATES:
        raise UsageError(
            f"unknown unit state {units_state!r} for --units: use one of "
            f"{', '.join(view.UNITS_STATES)}"
        )
    if watch and (as_json or list_ or resume or units_state):
        raise UsageError("--watch shows the live view; it does not combine with "
                         "--json, --list, --resume or --units")
    if list_ and (resume or units_state):
        raise UsageError("--list does not combine with --resume or --units")
    rdir = discovery.find_runs_dir(runs_dir)
    printer = Printer.for_stdout(no_color)
    now = time.time()

    if list_:
        entries = discovery.list_runs(rdir)
        if as_json:
            printer.text(dump_json([
                e.doc if e.doc is not None else {"file": str(e.path), "error": e.error}
                for e in entries
            ]))
            return
        if not entries:
            printer.text(f"no runs yet under {rdir}")
            return
        printer.lines([view.list_line(e.name, e.doc, e.error, now) for e in entries])
        return

    entry = discovery.pick_run(rdir, run)
    if entry is None:
        # No runs at all is not an error: a fresh project simply has none yet.
        click.echo(f"no runs yet under {rdir}; start one with `resumable run` or "
                   "`resumable init`", err=as_json)
        return
    file = str(entry.path)

    if resume:
        if entry.doc is None:
            desc = recipe.unreadable(entry.path, entry.error or "unreadable")
        else:
            desc = recipe.classify(entry.doc, entry.path, here=os.getcwd())
        if as_json:
            printer.text(dump_json(desc))
        else:
            printer.text("\n".join(recipe.render_text(desc, entry.doc)))
        if entry.doc is None:
            ctx.exit(1)
        return

    if entry.doc is None:
        if as_json:
            printer.text(dump_json({"file": file, "error": entry.error}))
            ctx.exit(1)
        raise CorruptRunError(entry.error or f"cannot read {file}")
    doc = entry.doc

    if as_json:
        printer.text(dump_json(doc))
        return
    if units_state is not None:
        printer.lines(view.render_units(doc, units_state, now))
        return
    here = os.getcwd()

    def frame(d: dict[str, Any], t: float) -> list[Line]:
        return view.render_status(d, file=file, now=t, width=printer.layout_width, here=here,
                                  show_eta=watch)

    if watch:
        try:
            ctx.exit(watch_fn(entry.path, frame, printer))
        except KeyboardInterrupt:
            # Ctrl-C is how a watch normally ends: no traceback, the conventional 130.
            printer.text("")
            ctx.exit(130)
        return
    printer.lines(frame(doc, now))


def watch_fn(path: Path, frame: Callable[[dict[str, Any], float], list[Line]],
             printer: Printer) -> int:
    """Indirection so tests can shorten the interval without touching the command."""
    return watch(path, frame, printer)

