"""Finding runs for the read-only views: the runs directory, every run in it, and picking one.

Everything here only reads. It never creates the runs directory, never takes a lock and never
rewrites a file: `resumable status` must leave the runs directory byte-identical (mtimes included),
because people run it against a live run while its runner writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from resumable.errors import CorruptRunError, NoRunError, ResumableError, StoreError

Doc = dict[str, Any]


@dataclass(frozen=True)
class RunEntry:
    """One run file: its document, or why it could not be read (``doc is None``)."""

    path: Path
    doc: Doc | None
    error: str | None
    sort_key: str

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def run_id(self) -> str:
        rid = self.doc.get("id") if self.doc is not None else None
        return rid if isinstance(rid, str) and rid else self.path.stem


def load_doc(path: Path) -> Doc:
    """The current document of one run file (snapshot + journal tail), read-only.

    Raises a ResumableError (CorruptRunError, StoreError, NoRunError if it vanished)."""
    from resumable.api import read_doc

    doc = read_doc(path)
    if not isinstance(doc, dict):
        raise CorruptRunError(f"{path} is not a run document")
    return doc


def find_runs_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--dir, else RESUMABLE_DIR, else the nearest `.resumable/runs` walking up, else ./... .

    Never creates anything (the core's find_runs_dir can; a reader must not)."""
    if explicit is not None:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("RESUMABLE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    cwd = Path.cwd().resolve()
    for base in (cwd, *cwd.parents):
        candidate = base / ".resumable" / "runs"
        if candidate.is_dir():
            return candidate
    return cwd / ".resumable" / "runs"


def _mtime_iso(path: Path) -> str:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return ""
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_entry(path: Path) -> RunEntry:
    try:
        doc = load_doc(path)
    except ResumableError as exc:
        return RunEntry(path, None, str(exc), _mtime_iso(path))
    key = ""
    for k in ("updatedAt", "createdAt"):
        v = doc.get(k)
        if isinstance(v, str) and v:
            key = v
            break
    return RunEntry(path, doc, None, key or _mtime_iso(path))


def run_files(runs_dir: Path) -> list[Path]:
    """Every `*.json` directly in the runs directory (archive/ and logs are not runs)."""
    try:
        return sorted(p for p in runs_dir.iterdir() if p.suffix == ".json" and p.is_file())
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StoreError(f"cannot list {runs_dir}: {exc.strerror or exc}") from exc


def list_runs(runs_dir: Path) -> list[RunEntry]:
    """Every run, newest first (the seed's order: updatedAt, else createdAt, else file mtime)."""
    entries = [read_entry(p) for p in run_files(runs_dir)]
    # Stable sort on the key, then the name, so ties print in a fixed order.
    entries.sort(key=lambda e: e.name)
    entries.sort(key=lambda e: e.sort_key, reverse=True)
    return entries


def pick_run(runs_dir: Path, run: str | None) -> RunEntry | None:
    """The run a user means, or None when there are no runs at all (and none was named).

    RUN is a path ending in `.json` (used as given), an exact id or file name, or an id prefix.
    Raises NoRunError (exit 3) when RUN matches nothing."""
    if run is not None and (run.endswith(".json") or os.sep in run):
        path = Path(run).expanduser()
        if path.is_file():
            return read_entry(path)
        # The seed also matches a bare file name inside the runs directory.
        if os.sep not in run and (runs_dir / run).is_file():
            return read_entry(runs_dir / run)
        raise NoRunError(f'no run matches "{run}" (no such file)')
    if run is not None:
        # Exact id: go straight to the file, so naming a run does not load every other run.
        direct = runs_dir / f"{run}.json"
        if direct.is_file():
            entry = read_entry(direct)
            if entry.doc is None or entry.run_id == run:
                return entry
    entries = list_runs(runs_dir)
    if run is None:
        if not entries:
            return None
        for entry in entries:
            if entry.doc is not None:
                return entry
        return entries[0]
    for entry in entries:
        if run in (entry.run_id, entry.name, entry.path.stem):
            return entry
    for entry in entries:
        if entry.run_id.startswith(run) or entry.path.stem.startswith(run):
            return entry
    if not entries:
        raise NoRunError(f'no run matches "{run}": there are no runs under {runs_dir}')
    raise NoRunError(f'no run matches "{run}" under {runs_dir}')
