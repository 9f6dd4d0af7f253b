"""The Python API: everything the CLI can do, as methods of a ``Run``.

    >>> import resumable
    >>> run = resumable.open_run("nightly", runs_dir="/tmp/runs")
    >>> run.init("migrate the users table", units=["extract", "load"])
    'nightly'
    >>> run.unit("extract", "done")
    >>> run.resume_set()["eligible"]
    ['load']

Every write is an event appended to the run's journal and fsynced before the method returns.
Refusals raise ``RefusedError`` (exit 2 in the CLI), bad input ``InvalidInputError``.
"""

from __future__ import annotations

import os

from resumable.core.model import (
    VALIDATION_ALIASES,
    check_nesting,
    check_phase_state,
    check_run_id,
    check_unit_id,
    check_unit_state,
    default_run_id,
    stamp,
    summary,
)
from resumable.core.plan import resume_set
from resumable.errors import InvalidInputError, NoRunError
from resumable.store.files import writer as store
from resumable.store.files.writer import read_doc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from types import TracebackType
    from typing import Any

__all__ = ["Run", "find_runs_dir", "open_run", "read_doc"]


def validate_launch(launch: object) -> dict[str, Any]:
    """The seed's ``--launch`` checks: a plain object with a non-blank ``scriptPath`` and, when
    present, an object ``args``; or the runner's ``{"kind": "resumable", "argv": [...]}``."""
    if not isinstance(launch, dict):
        kind = "null" if launch is None else "an array" if isinstance(launch, list) else (
            type(launch).__name__)
        raise InvalidInputError(f"--launch must be a JSON object {{ scriptPath, args }} — got {kind}")
    if launch.get("kind") == "resumable":
        argv = launch.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise InvalidInputError("--launch.argv must be a non-empty array of strings")
        return launch
    script = launch.get("scriptPath")
    if not isinstance(script, str) or not script.strip():
        raise InvalidInputError(
            "--launch.scriptPath must be a non-empty string (the script that resumes this run)"
        )
    if "args" in launch and not isinstance(launch["args"], dict):
        raise InvalidInputError("--launch.args must be a JSON object when present")
    return launch


def find_runs_dir(explicit: str | os.PathLike[str] | None = None, *, create: bool = False) -> Path:
    """``explicit`` (``--dir``), else ``$RESUMABLE_DIR``, else the nearest ``.resumable/runs``
    walking up from the current directory (as git finds ``.git``), else ``./.resumable/runs``."""
    from pathlib import Path

    return Path(store.runs_dir(explicit, create=create))


class Run:
    """One run: its files, and a method per verb. Not thread-safe; one per process is typical,
    but any number of processes may hold a Run on the same files at once."""

    def __init__(self, files: store.RunFiles, runs_dir: str) -> None:
        self.files = files
        self._runs_dir = runs_dir
        self._writer = store.Writer(files)

    # -- files (Path objects for callers; the store itself works on strings) --
    @property
    def runs_dir(self) -> Path:
        from pathlib import Path

        return Path(self._runs_dir)

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.files.snapshot)

    @property
    def journal_path(self) -> Path:
        from pathlib import Path

        return Path(self.files.journal)

    @property
    def lock_path(self) -> Path:
        from pathlib import Path

        return Path(self.files.lock)

    @property
    def data_dir(self) -> Path:
        from pathlib import Path

        return Path(self.files.data_dir)

    @property
    def snapshot_error(self) -> str | None:
        """Set when the last snapshot refresh failed (the write itself is safe in the journal)."""
        return self._writer.snapshot_error

    def exists(self) -> bool:
        return os.path.lexists(self.files.snapshot) or os.path.lexists(self.files.journal)

    # -- reads --
    @property
    def doc(self) -> dict[str, Any]:
        """The current document (treat it as read-only; it changes as you write)."""
        return self.refresh()

    def refresh(self) -> dict[str, Any]:
        state = self._writer.current()
        if state.doc is None:
            raise NoRunError(f"no run at {self.files.snapshot} — create it with `resumable init`")
        return state.doc

    def summary(self) -> dict[str, Any]:
        return summary(self.refresh())

    def resume_set(self) -> dict[str, Any]:
        return resume_set(self.refresh())

    def status_text(self, *, width: int = 100) -> str:
        """The default view of ``resumable status`` for this run, as plain text."""
        import time

        from resumable.view.status import plain, render_status

        lines = render_status(self.refresh(), file=self.files.snapshot, now=time.time(), width=width)
        return "\n".join(plain(line) for line in lines)

    def resume_recipe(self) -> dict[str, Any]:
        """How to resume this run: ``resumable status --resume --json``'s descriptor."""
        from resumable.core.recipe import classify

        return classify(self.refresh(), self.path, here=os.getcwd())

    def report_html(self) -> str:
        """``resumable report``'s self-contained HTML page for this run."""
        from resumable.view.report import build_html

        return build_html(self.refresh(), file=self.files.snapshot)

    # -- writes --
    def _commit(self, event: dict[str, Any], *, init: bool = False, lazy_view: bool = False) -> Any:
        check_nesting(event)
        event["at"] = stamp()
        return self._writer.commit(lambda _doc: event, init=init, lazy_view=lazy_view)

    def init(
        self,
        task: str,
        *,
        units: Sequence[str] = (),
        run_id: str | None = None,
        launch: dict[str, Any] | None = None,
        required_phases: Sequence[str] = (),
        require_validation: bool = False,
    ) -> str:
        """Start the run (refused, exit 2, while a live run has these files; a finished run's
        files are archived first). Returns the run id."""
        if not isinstance(task, str) or not task.strip():
            raise InvalidInputError('init requires a task description (--task "<desc>")')
        if self.files.by_id:
            stem = self.files.stem
            if run_id is not None and run_id != stem:
                raise InvalidInputError(
                    f"--id {run_id} does not match the run named {stem}; give one or the other"
                )
            run_id = stem
        run_id = check_run_id(run_id) if run_id is not None else default_run_id()
        for u in units:
            check_unit_id(u)
        if launch is not None:
            validate_launch(launch)
        event: dict[str, Any] = {"t": "init", "id": run_id, "task": task, "units": list(units)}
        if launch is not None:
            event["launch"] = launch
        if required_phases:
            event["requiredPhases"] = list(required_phases)
        if require_validation:
            event["requireValidation"] = True
        self._commit(event, init=True)
        return run_id

    def begin(self, launch: dict[str, Any] | None = None) -> None:
        """(Re)open the run for a new working session: status running, launch recorded."""
        event: dict[str, Any] = {"t": "begin"}
        if launch is not None:
            event["launch"] = validate_launch(launch)
        self._commit(event)

    def unit(
        self,
        unit_id: str,
        state: str,
        *,
        note: str | None = None,
        deps: Sequence[str] | None = None,
        attempt: dict[str, Any] | None = None,
        fields: dict[str, Any] | None = None,
        lazy_view: bool = False,
    ) -> None:
        """Set a unit's state. ``lazy_view=True`` skips rewriting a small run's snapshot file for
        this write (it is durable in the journal and every resumable reader sees it): the runner
        uses it when a step starts, so a step costs one snapshot rewrite, not two."""
        check_unit_id(unit_id)
        check_unit_state(state)
        event: dict[str, Any] = {"t": "unit", "unit": unit_id, "state": state}
        if note is not None:
            event["note"] = note
        if deps is not None:
            event["deps"] = [check_unit_id(d) for d in deps]
        if attempt is not None:
            event["attempt"] = attempt
        if fields is not None:
            event["fields"] = fields
        self._commit(event, lazy_view=lazy_view)

    def invalidate(self, unit_id: str, reason: str) -> None:
        """Send a unit (typically done) back to pending, recording why: the only way a done unit
        is ever re-run."""
        self._commit({"t": "invalidate", "unit": check_unit_id(unit_id), "reason": reason})

    def phase(self, name: str, state: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidInputError("phase requires <phase> <pending|running|done|blocked|skipped>")
        self._commit({"t": "phase", "phase": name, "state": check_phase_state(state)})

    def item(self, items: object) -> list[str]:
        """Record open findings; returns their stable ids (an object or an array of them)."""
        out: list[str] = self._commit({"t": "item", "items": items})
        return out

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """Move open findings to resolvedItems; returns the ids actually moved."""
        out: list[str] = self._commit({"t": "resolve", "ids": [str(i) for i in ids]})
        return out

    def validation(self, status: str, note: str | None = None) -> None:
        canonical = VALIDATION_ALIASES.get(status)
        if canonical is None:
            raise InvalidInputError("validation requires <green|red> (aliases: pass/ok/fail)")
        event: dict[str, Any] = {"t": "validation", "status": canonical}
        if note is not None:
            event["note"] = note
        self._commit(event)

    def finalize(self, status: str, result: str | None = None) -> None:
        if status not in ("done", "needs_attention", "aborted"):
            raise InvalidInputError("finalize requires <done|needs_attention|aborted>")
        event: dict[str, Any] = {"t": "finalize", "status": status}
        if result is not None:
            event["result"] = result
        self._commit(event)

    # -- lifetime --
    def flush(self) -> None:
        """Bring the snapshot file up to date (large runs refresh it on a budget)."""
        self._writer.flush()

    def close(self) -> None:
        try:
            self._writer.flush()
        finally:
            self._writer.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_run(
    run: str | os.PathLike[str], *, runs_dir: str | os.PathLike[str] | None = None
) -> Run:
    """A run by id (``<runs-dir>/<id>.json``) or by the path of its ``.json`` status file.
    Opening does not touch the disk; the first write of ``init`` creates the files."""
    directory = store.runs_dir(runs_dir)
    return Run(store.resolve_run(run, directory), directory)


def gc(runs_dir: str | os.PathLike[str] | None = None, keep_days: float = 7) -> tuple[int, str]:
    """Archive done/aborted runs older than ``keep_days``; returns (count, archive dir), count -1
    when there is no runs directory."""
    if keep_days < 0 or keep_days != keep_days:
        raise InvalidInputError("--keep-days must be a non-negative number")
    return store.gc(store.runs_dir(runs_dir), keep_days)
