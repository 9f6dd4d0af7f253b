"""What the user sees while a job runs.

- a terminal: a rich live view (overall progress done/total, elapsed, ETA from past step durations,
  running steps with their elapsed time, finished steps with status and duration);
- no terminal (CI, pipes): one plain line per step start and finish, greppable, log paths relative
  to the current directory; skipped steps are one summary line (one line each with ``--verbose``);
- ``--quiet``: nothing but warnings and notices (stderr) and the final summary;
- ``--stream`` (and ``-v``): also each running step's output lines as they come, prefixed with its
  id (``runner.liveout``), above the live view on a terminal, the same plain lines elsewhere.

Everything here is O(1) per event (the ETA keeps running sums), so a 100,000-step job costs no more
per step than a 10-step one.

rich is imported only by the live view: ``resumable run`` in a pipe never pays for it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

from resumable.core.instance import SEP
from resumable.core.stamps import format_duration
from resumable.core.text import escape_controls
from resumable.runner.explain import Decision
from resumable.runner.jobfile import Job, Step

if TYPE_CHECKING:
    from resumable.runner.liveout import LogFollower


def fmt_duration(seconds: float) -> str:
    """A step's duration: the one format of ``core.stamps`` (``1.2s``, ``3m 05s``), and below a
    second in milliseconds (a fast step is 8ms, not 0.0s)."""
    if 0 <= seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    return format_duration(seconds)


def show_path(path: str) -> str:
    """A log path as the user can paste it from here: relative to the current directory when
    that is shorter."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if len(rel) < len(path) else path


def tail(path: str, lines: int = 10) -> list[str]:
    """The last lines of a log, read from the end (logs can be large)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 8192))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return data.splitlines()[-lines:]


class PlainReporter:
    """One line per start and finish; ``quiet`` keeps only warnings and notices."""

    wants_estimates = False  # past durations, for an ETA (an O(steps) pass the plain view skips)

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None,
                 quiet: bool = False, verbose: bool = False, stream: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = quiet
        self.verbose = verbose
        self.failed_logs: list[tuple[str, str]] = []
        self.follower: LogFollower | None = None
        self.logs: dict[tuple[str, int], str] = {}  # (step, attempt) -> its log, while streaming
        self.families = FamilyTally()
        if stream:
            from resumable.runner.liveout import LogFollower

            self.follower = LogFollower(self._lines)

    # -- live output (--stream) ------------------------------------------------------------------

    def will_log(self, step_id: str, attempt: int, path: str) -> None:
        """Where an attempt about to start writes its output (called only while streaming)."""
        self.logs[(step_id, attempt)] = path

    def _lines(self, lines: list[str]) -> None:
        """Output lines of steps (prefixed and escaped by the follower), in one write."""
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()

    def _follow(self, step: Step, attempt: int) -> None:
        if self.follower is not None:
            path = self.logs.pop((step.id, attempt), None)
            if path is not None:
                self.follower.follow(step.id, path)

    def _unfollow(self, step: Step) -> None:
        if self.follower is not None:
            self.follower.finish(step.id)

    def _width(self, decisions: Mapping[str, Decision]) -> None:
        if self.follower is not None:
            self.follower.width = min(max((len(d.step) for d in decisions.values() if d.run), default=0), 24)

    def _p(self, text: str) -> None:
        if not self.quiet:
            print(escape_controls(text), file=self.out, flush=True)

    def start(self, job: Job, decisions: Mapping[str, Decision],
              estimates: Mapping[str, float]) -> None:
        self._width(decisions)
        self.families.plan(decisions)
        skipped = 0
        grouped = not self.verbose and self.families.any
        for d in decisions.values():
            if not d.run:
                skipped += 1
                if self.verbose:
                    self._p(f"skip   {d.step} ({d.reason})")
            elif d.reason != "never ran" and not grouped:
                self._p(f"rerun  {d.step} ({d.reason})")
        if grouped:
            for line in rerun_lines(decisions):
                self._p(line)
        if skipped and not self.verbose:
            self._p(skip_summary(skipped, len(decisions)))

    def step_started(self, step: Step, attempt: int) -> None:
        if not self.quiet:
            self._p(f"start  {step.id} (attempt {attempt})")
        self._follow(step, attempt)

    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None:
        self._unfollow(step)
        if status != "done" and retry_in is None:
            self.failed_logs.append((step.id, log))
        if self.quiet:
            return  # nothing to print: a 100,000-step run need not format 100,000 lines
        code = "" if status == "done" else f", exit {exit_code}"
        retry = f"; retrying in {retry_in:.1f}s" if retry_in is not None else ""
        self._p(f"{status:<6} {step.id} ({fmt_duration(duration)}{code}; log {show_path(log)}){retry}")
        if retry_in is None:
            self._family_end(step.id, status)

    def _family_end(self, step_id: str, status: str) -> None:
        """A line for a family once every instance this session runs has ended."""
        line = self.families.ended(step_id, status)
        if line is not None:
            self._p(line)

    def step_blocked(self, step: Step, root: str) -> None:
        self._p(f"blocked {step.id} (needs {root}, which failed)")
        self._family_end(step.id, "blocked")

    def step_skipped(self, step: Step, reason: str) -> None:
        """A step planned to run, skipped after all (early cutoff: its needs made the same)."""
        self._p(f"skip   {step.id} ({reason})")
        self._family_end(step.id, "skipped")

    def warn(self, message: str) -> None:
        print(f"resumable: warning: {escape_controls(message)}", file=self.err, flush=True)

    def notice(self, message: str) -> None:
        """Something the user must see at once, even with --quiet (e.g. after Ctrl-C)."""
        print(f"resumable: {escape_controls(message)}", file=self.err, flush=True)

    def tick(self) -> None:
        if self.follower is not None:
            self.follower.poll()

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()

    def failure_tails(self, out: IO[str]) -> None:
        for sid, log in self.failed_logs:
            lines = tail(log)
            if lines:
                # A step's output is data: printed raw it could retitle the window or clear it.
                print(escape_controls(f"--- last lines of {sid} ({show_path(log)}) ---"), file=out)
                for line in lines:
                    print(f"  {escape_controls(line)}", file=out)


def rerun_lines(decisions: Mapping[str, Decision]) -> list[str]:
    """``rerun`` lines in the job's order: a step's, or a family's with instances that run again."""
    from resumable.runner.familyview import family_line, grouped

    out = []
    for name, ds in grouped(decisions):
        if not any(d.run and d.reason != "never ran" for d in ds):
            continue
        if len(ds) == 1 and ds[0].step == name:
            out.append(f"rerun  {name} ({ds[0].reason})")
        else:
            out.append("rerun  " + family_line(name, ds).removeprefix("run   "))
    return out


class FamilyTally:
    """Per family of steps: how many instances this session runs, and how they ended, for one
    line once the last one ended (``clean: 8 of 8 instances ended: 7 done, 1 failed``) and the
    live view's counts."""

    def __init__(self) -> None:
        self.any = False
        self.total: dict[str, int] = {}  # instances in the plan
        self.left: dict[str, int] = {}  # to end in this session
        self.ends: dict[str, dict[str, int]] = {}
        self.done: dict[str, int] = {}  # done, skipped included

    def plan(self, decisions: Mapping[str, Decision]) -> None:
        for sid, d in decisions.items():
            fam, sep, _ = sid.partition(SEP)
            if not sep:
                continue
            self.any = True
            self.total[fam] = self.total.get(fam, 0) + 1
            if d.run:
                self.left[fam] = self.left.get(fam, 0) + 1
            else:
                self.done[fam] = self.done.get(fam, 0) + 1

    def ended(self, step_id: str, status: str) -> str | None:
        fam, sep, _ = step_id.partition(SEP)
        if not sep or fam not in self.left:
            return None
        ends = self.ends.setdefault(fam, {})
        ends[status] = ends.get(status, 0) + 1
        if status in ("done", "skipped"):
            self.done[fam] = self.done.get(fam, 0) + 1
        self.left[fam] -= 1
        if self.left[fam]:
            return None
        ran = sum(ends.values())
        parts = ", ".join(f"{n} {st}" for st, n in sorted(ends.items()))
        return f"{fam}: {ran} of {self.total[fam]} instances ended ({parts})"


def skip_summary(skipped: int, total: int) -> str:
    every = "all " if skipped == total else ""
    return f"skip   {every}{skipped} step{'' if skipped == 1 else 's'} already done (-v lists them)"


class LiveReporter(PlainReporter):
    """The rich live view for terminals. The bar is green while nothing failed, red once a step
    failed; the screen is redrawn at most ``_REDRAW`` times a second, however fast steps finish."""

    _REDRAW = 0.1
    wants_estimates = True

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None,
                 verbose: bool = False, stream: bool = False) -> None:
        super().__init__(out, err, verbose=verbose, stream=stream)
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=self.out, highlight=False)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.total = 0
        self.done = 0
        self.failed = 0
        self.t0 = time.monotonic()
        self.running: dict[str, tuple[int, float]] = {}
        self.estimates: dict[str, float] = {}
        self.remaining: set[str] = set()
        # Sums over the remaining steps that have an estimate: the ETA in O(running), not O(steps).
        self.est_sum = 0.0
        self.est_n = 0
        self._last = 0.0
        self._dirty = False

    def start(self, job: Job, decisions: Mapping[str, Decision],
              estimates: Mapping[str, float]) -> None:
        self._width(decisions)
        self.families.plan(decisions)
        self.total = len(decisions)
        self.done = sum(1 for d in decisions.values() if not d.run)
        self.remaining = {d.step for d in decisions.values() if d.run}
        self.estimates = dict(estimates)
        for sid in self.remaining:
            if sid in self.estimates:
                self.est_sum += self.estimates[sid]
                self.est_n += 1
        self.t0 = time.monotonic()
        skipped = 0
        for d in decisions.values():
            if not d.run:
                skipped += 1
                if self.verbose:
                    self.console.print(f"[dim]skip   {_markup(d.step)} ({_markup(d.reason)})[/dim]")
        if skipped and not self.verbose:
            self.console.print(f"[dim]{_markup(skip_summary(skipped, self.total))}[/dim]")
        self.live.start()
        self._refresh()

    def _forget(self, sid: str) -> None:
        """``sid`` no longer counts towards the ETA's remaining work."""
        if sid in self.remaining:
            self.remaining.discard(sid)
            if sid in self.estimates:
                self.est_sum -= self.estimates[sid]
                self.est_n -= 1

    def _estimate(self, sid: str, seconds: float) -> None:
        if sid in self.remaining:
            if sid in self.estimates:
                self.est_sum -= self.estimates[sid]
            else:
                self.est_n += 1
            self.est_sum += seconds
        self.estimates[sid] = seconds

    def _eta(self) -> str:
        if not self.est_n:
            return "?"
        now = time.monotonic()
        left = self.est_sum
        for sid, (_, started) in self.running.items():
            if sid in self.estimates:
                left -= min(self.estimates[sid], now - started)
        left *= len(self.remaining) / self.est_n  # steps never timed count as the average
        return fmt_duration(max(left, 0.0))

    def _render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        head = Table.grid(padding=(0, 1))
        colour = "red" if self.failed else "green"
        head.add_row(
            ProgressBar(total=max(self.total, 1), completed=self.done, width=30,
                        complete_style=colour, finished_style=colour),
            Text(f"{self.done}/{self.total} done" + (f", {self.failed} failed" if self.failed else ""),
                 style="red" if self.failed else ""),
            Text(f"elapsed {fmt_duration(now - self.t0)}"),
            Text(f"ETA {self._eta()}"),
        )
        parts: list[Any] = [head]
        shown = 0
        for fam, running in self._running_groups():
            if fam is not None:
                # A family is a line with its counts, its running instances under it.
                done, total = self.families.done.get(fam, 0), self.families.total.get(fam, 0)
                parts.append(Text(f"  {escape_controls(fam)}: {done}/{total} done, {len(running)} running",
                                  style="bold cyan"))
            for sid, (n, started) in running[:max(0, min(5 if fam else 20, 20 - shown))]:
                indent = "    " if fam is not None else "  "
                parts.append(Text(f"{indent}running {escape_controls(sid)} (attempt {n}) "
                                  f"{fmt_duration(now - started)}", style="cyan"))
                shown += 1
        if len(self.running) > shown:
            parts.append(Text(f"  ... and {len(self.running) - shown} more running", style="cyan"))
        return Group(*parts)

    def _running_groups(self) -> list[tuple[str | None, list[tuple[str, tuple[int, float]]]]]:
        """The running steps: ordinary ones first, then by family."""
        plain: list[tuple[str, tuple[int, float]]] = []
        families: dict[str, list[tuple[str, tuple[int, float]]]] = {}
        for item in sorted(self.running.items()):
            fam, sep, _ = item[0].partition(SEP)
            if sep:
                families.setdefault(fam, []).append(item)
            else:
                plain.append(item)
        out: list[tuple[str | None, list[tuple[str, tuple[int, float]]]]] = [(None, plain)] if plain else []
        out.extend(families.items())
        return out

    def _refresh(self) -> None:
        self.live.update(self._render(), refresh=True)
        self._last = time.monotonic()
        self._dirty = False

    def _changed(self) -> None:
        if time.monotonic() - self._last >= self._REDRAW:
            self._refresh()
        else:
            self._dirty = True

    def step_started(self, step: Step, attempt: int) -> None:
        self.running[step.id] = (attempt, time.monotonic())
        self._follow(step, attempt)
        self._changed()

    def _lines(self, lines: list[str]) -> None:
        from rich.text import Text

        self.console.print(Text("\n".join(lines)), highlight=False)  # above the live view

    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None:
        self._unfollow(step)
        self.running.pop(step.id, None)
        self._estimate(step.id, duration)
        style = {"done": "green", "failed": "red", "timeout": "red"}.get(status, "yellow")
        code = "" if status == "done" else f", exit {exit_code}"
        retry = f"; retrying in {retry_in:.1f}s" if retry_in is not None else ""
        self.console.print(
            f"[{style}]{status:<6}[/{style}] {_markup(step.id)} ({fmt_duration(duration)}{code}){retry}"
        )
        if status == "done" or retry_in is None:
            self._forget(step.id)
            self._family_end(step.id, status)
        if status == "done":
            self.done += 1
        elif retry_in is None:
            if status != "interrupted":
                self.failed += 1
            self.failed_logs.append((step.id, log))
        self._changed()

    def _family_end(self, step_id: str, status: str) -> None:
        line = self.families.ended(step_id, status)
        if line is not None:
            self.console.print(f"[bold]{_markup(line)}[/bold]")

    def step_skipped(self, step: Step, reason: str) -> None:
        self._forget(step.id)
        self.done += 1
        self.console.print(f"[dim]skip   {_markup(step.id)} ({_markup(reason)})[/dim]")
        self._family_end(step.id, "skipped")
        self._changed()

    def step_blocked(self, step: Step, root: str) -> None:
        self._forget(step.id)
        self.console.print(f"[yellow]blocked[/yellow] {_markup(step.id)} (needs {_markup(root)}, which failed)")
        self._family_end(step.id, "blocked")

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]resumable: warning: {_markup(message)}[/yellow]")

    def notice(self, message: str) -> None:
        self.console.print(f"[bold]resumable: {_markup(message)}[/bold]")
        self._refresh()

    def tick(self) -> None:
        if self.follower is not None:
            self.follower.poll()
        if self._dirty or time.monotonic() - self._last > 0.25:
            self._refresh()

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()
        self._refresh()
        self.live.stop()


def _markup(text: str) -> str:
    """Data inside rich markup: control characters escaped, and "[...]" not taken for a style."""
    from rich.markup import escape

    return escape(escape_controls(text))


def make_reporter(quiet: bool, *, verbose: bool = False, out: IO[str] | None = None,
                  stream: bool = False) -> PlainReporter:
    """``stream``: also print the running steps' output lines (``--stream``, ``-v``)."""
    to = out or sys.stdout
    if not quiet and to.isatty():
        return LiveReporter(to, verbose=verbose, stream=stream)
    return PlainReporter(to, quiet=quiet, verbose=verbose, stream=stream and not quiet)
