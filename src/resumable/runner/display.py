"""What the user sees while a job runs.

- a terminal: a rich live view (overall progress done/total, elapsed, ETA from past step durations,
  running steps with their elapsed time, finished steps with status and duration);
- no terminal (CI, pipes): one plain line per step start and finish, greppable;
- ``--quiet``: nothing but warnings (stderr) and the final summary.

rich is imported only by the live view: ``resumable run`` in a pipe never pays for it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from resumable.core.text import escape_controls
from resumable.runner.explain import Decision
from resumable.runner.jobfile import Job, Step


def fmt_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


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
    """One line per start and finish; ``quiet`` keeps only warnings."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None,
                 quiet: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = quiet
        self.failed_logs: list[tuple[str, str]] = []

    def _p(self, text: str) -> None:
        if not self.quiet:
            print(escape_controls(text), file=self.out, flush=True)

    def start(self, job: Job, decisions: Mapping[str, Decision],
              estimates: Mapping[str, float]) -> None:
        for d in decisions.values():
            if not d.run:
                self._p(f"skip   {d.step} ({d.reason})")
            elif d.reason != "never ran":
                self._p(f"rerun  {d.step} ({d.reason})")

    def step_started(self, step: Step, attempt: int) -> None:
        self._p(f"start  {step.id} (attempt {attempt})")

    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None:
        code = "" if status == "done" else f", exit {exit_code}"
        retry = f"; retrying in {retry_in:.1f}s" if retry_in is not None else ""
        self._p(f"{status:<6} {step.id} ({fmt_duration(duration)}{code}; log {log}){retry}")
        if status != "done" and retry_in is None:
            self.failed_logs.append((step.id, log))

    def step_blocked(self, step: Step, root: str) -> None:
        self._p(f"blocked {step.id} (needs {root}, which failed)")

    def warn(self, message: str) -> None:
        print(f"resumable: warning: {escape_controls(message)}", file=self.err, flush=True)

    def tick(self) -> None:
        pass

    def close(self) -> None:
        pass

    def failure_tails(self, out: IO[str]) -> None:
        for sid, log in self.failed_logs:
            lines = tail(log)
            if lines:
                # A step's output is data: printed raw it could retitle the window or clear it.
                print(escape_controls(f"--- last lines of {sid} ({log}) ---"), file=out)
                for line in lines:
                    print(f"  {escape_controls(line)}", file=out)


class LiveReporter(PlainReporter):
    """The rich live view for terminals."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        super().__init__(out, err)
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=self.out, highlight=False)
        self.live = Live(console=self.console, refresh_per_second=8, transient=False)
        self.total = 0
        self.done = 0
        self.t0 = time.monotonic()
        self.running: dict[str, tuple[int, float]] = {}
        self.estimates: dict[str, float] = {}
        self.remaining: set[str] = set()
        self._last = 0.0

    def start(self, job: Job, decisions: Mapping[str, Decision],
              estimates: Mapping[str, float]) -> None:
        self.total = len(decisions)
        self.done = sum(1 for d in decisions.values() if not d.run)
        self.remaining = {d.step for d in decisions.values() if d.run}
        self.estimates = dict(estimates)
        self.t0 = time.monotonic()
        for d in decisions.values():
            if not d.run:
                self.console.print(f"[dim]skip   {d.step} ({_markup(d.reason)})[/dim]")
        self.live.start()
        self._refresh()

    def _eta(self) -> str:
        known = [self.estimates[s] for s in self.remaining if s in self.estimates]
        if not known:
            return "?"
        now = time.monotonic()
        left = sum(known)
        for sid, (_, started) in self.running.items():
            if sid in self.estimates:
                left -= min(self.estimates[sid], now - started)
        left *= len(self.remaining) / len(known)  # steps never timed count as the average
        return fmt_duration(max(left, 0.0))

    def _render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        head = Table.grid(padding=(0, 1))
        head.add_row(
            ProgressBar(total=max(self.total, 1), completed=self.done, width=30),
            Text(f"{self.done}/{self.total} done"),
            Text(f"elapsed {fmt_duration(now - self.t0)}"),
            Text(f"ETA {self._eta()}"),
        )
        parts: list[Any] = [head]
        for sid, (n, started) in sorted(self.running.items()):
            parts.append(Text(f"  running {sid} (attempt {n}) {fmt_duration(now - started)}",
                              style="cyan"))
        return Group(*parts)

    def _refresh(self) -> None:
        self.live.update(self._render(), refresh=True)
        self._last = time.monotonic()

    def step_started(self, step: Step, attempt: int) -> None:
        self.running[step.id] = (attempt, time.monotonic())
        self._refresh()

    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None:
        self.running.pop(step.id, None)
        self.estimates[step.id] = duration
        style = {"done": "green", "failed": "red", "timeout": "red"}.get(status, "yellow")
        code = "" if status == "done" else f", exit {exit_code}"
        retry = f"; retrying in {retry_in:.1f}s" if retry_in is not None else ""
        self.console.print(
            f"[{style}]{status:<6}[/{style}] {step.id} ({fmt_duration(duration)}{code}){retry}"
        )
        if status == "done" or retry_in is None:
            self.remaining.discard(step.id)
        if status == "done":
            self.done += 1
        elif retry_in is None:
            self.failed_logs.append((step.id, log))
        self._refresh()

    def step_blocked(self, step: Step, root: str) -> None:
        self.remaining.discard(step.id)
        self.console.print(f"[yellow]blocked[/yellow] {step.id} (needs {root}, which failed)")

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]resumable: warning: {_markup(message)}[/yellow]")

    def tick(self) -> None:
        if time.monotonic() - self._last > 0.25:
            self._refresh()

    def close(self) -> None:
        self.live.stop()


def _markup(text: str) -> str:
    """Data inside rich markup: control characters escaped, and "[...]" not taken for a style."""
    from rich.markup import escape

    return escape(escape_controls(text))


def make_reporter(quiet: bool, *, verbose: bool = False, out: IO[str] | None = None) -> PlainReporter:
    stream = out or sys.stdout
    if not quiet and stream.isatty():
        return LiveReporter(stream)
    return PlainReporter(stream, quiet=quiet)
