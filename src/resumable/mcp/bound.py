"""The one store a server was started on, and the checks every tool argument passes first.

An agent's arguments are untrusted: a run id is checked as the CLI checks it and may not name a
file (``../x``, ``/etc/passwd``, ``x.json`` are refused), a job file must be a relative path below
the directory the server was started in with no link on the way, and every number has bounds. A
refused argument is a one-line ``InvalidInputError``; nothing is read or written for it.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from resumable import store
from resumable.core.model import check_run_id, check_unit_id
from resumable.errors import InvalidInputError, NoRunError
from resumable.store.backend import DigestReading
from resumable.view import discovery

if TYPE_CHECKING:
    from resumable.store.backend import Backend, Digests, Doc, RunHandle

T = TypeVar("T")

# The states a unit is listed under (``view.units.unit_bucket``); "running" is in_progress.
UNIT_FILTERS = ("pending", "in_progress", "running", "done", "failed", "timeout", "blocked", "dep_blocked",
                "interrupted", "malformed", "removed")


def run_id(run: object) -> str:
    """A run id as the CLI takes one, and never a path: the server reads only its own store."""
    if not isinstance(run, str):
        raise InvalidInputError("run must be a run id (a string)")
    if run.endswith(".json") or "/" in run or os.sep in run:
        raise InvalidInputError(f"run {run[:200]!r} is a path; give the run's id (list_runs shows them):"
                                " this server reads only the store it was started on")
    return check_run_id(run)


def unit_id(unit: object) -> str:
    if not isinstance(unit, str):
        raise InvalidInputError("unit must be a unit id (a string)")
    return check_unit_id(unit)


def unit_filter(state: object) -> str | None:
    """A units filter: one of ``UNIT_FILTERS`` (None: every unit)."""
    if state is None:
        return None
    if state not in UNIT_FILTERS:
        raise InvalidInputError(f"unknown state {str(state)[:100]!r}; the states are {', '.join(UNIT_FILTERS)}")
    return "in_progress" if state == "running" else str(state)


def bounded(value: object, name: str, low: int, high: int) -> int:
    """An integer argument within [low, high]; anything else refused with the bounds."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInputError(f"{name} must be a whole number from {low} to {high} (got {str(value)[:40]});"
                                " page with next_cursor for more")
    return value


def job_file(path: object, root: str) -> str:
    """A job file the server may read: a relative path ending in .toml, below ``root`` (the directory
    the server was started in), that is a regular file reached through no symbolic link."""
    if not isinstance(path, str) or not path:
        raise InvalidInputError("jobfile must be a relative path to a .toml job file")
    if os.path.isabs(path) or path.startswith("~"):
        raise InvalidInputError(f"jobfile {path[:200]!r} is absolute; give it relative to {root}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise InvalidInputError(f"jobfile {path[:200]!r} leaves {root}; give a path below it")
    if not parts[-1].endswith(".toml"):
        raise InvalidInputError(f"jobfile {path[:200]!r} is not a .toml job file")
    here = root
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            raise InvalidInputError(f"no job file {path[:200]!r} under {root}") from None
        except OSError as exc:
            raise InvalidInputError(f"cannot read jobfile {path[:200]!r}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise InvalidInputError(f"jobfile {path[:200]!r} goes through a symbolic link ({part}); give the"
                                    " real path below the server's directory")
        last = i == len(parts) - 1
        if (last and not stat.S_ISREG(st.st_mode)) or (not last and not stat.S_ISDIR(st.st_mode)):
            raise InvalidInputError(f"jobfile {path[:200]!r} is not a regular file")
    return "/".join(parts)


class BoundStore:
    """The store a server answers about, chosen once at start (``--dir``, ``--store``, or the
    environment and the nearest runs directory, as every command finds it), with a lock: tools run on
    worker threads, and a store handle serves one thread at a time."""

    def __init__(self, runs_dir: str | None, store_url: str | None, *, allow_writes: bool,
                 root: str | None = None) -> None:
        self.backend: Backend = store.open_backend(runs_dir, url=store_url)
        self.allow_writes = allow_writes
        self.root = os.path.abspath(root or os.getcwd())  # the directory job files are read below
        self.lock = threading.RLock()
        # The option that names this store in a command a hint prints: always given, since an agent
        # may paste the command anywhere (a runs directory found by walking up included).
        where = self.backend.root
        self.option: tuple[str, str] = ("--store", where) if where.startswith(store.URL_SCHEMES) else ("--dir", where)
        self.is_database = self.option[0] == "--store"
        # Runners this server started (starter.Started), by run id: their pid, exit and output.
        self.started: dict[str, Any] = {}
        self._cached: RunView | None = None

    @property
    def description(self) -> str:
        return self.backend.description

    def now(self) -> float:
        return time.time()

    def handle(self, run: object) -> RunHandle:
        """The run named ``run`` (an exact id); NoRunError (exit 3) when there is none."""
        rid = run_id(run)
        handle = self.backend.open(rid)
        if not handle.exists():
            raise NoRunError(f'no run matches "{rid}" under {self.backend.root} (list_runs shows the runs)')
        return handle

    def pick(self, run: object, digests: bool = False) -> discovery.Picked:
        """The run named ``run``, or the newest when None: what ``resumable status`` picks."""
        rid = None if run is None else run_id(run)
        picked = discovery.pick_run(self.backend, rid, digests)
        if picked is None:
            raise NoRunError(f"no runs yet under {self.backend.root}: start one with `resumable run` or"
                             " `resumable init`")
        if picked.entry.doc is None:
            raise discovery.unreadable(picked.entry)
        return picked

    def view(self, run: object) -> RunView:
        """The run for paging: its document (a large run's digests where the store keeps them), kept
        while the run's change token stays the same, so paging through a big run reads it once."""
        rid = run_id(run)
        cached = self._cached
        handle = cached.handle if cached is not None and cached.run_id == rid else self.handle(rid)
        # The token is taken before the read: a write landing between them leaves a newer document
        # under an older token, which is read again next time, never an older one kept.
        token = handle.change_token()
        if cached is not None and cached.run_id == rid and cached.token == token:
            return cached
        self._cached = None
        digests = handle.load_digests() if isinstance(handle, DigestReading) else None
        doc = digests.doc if digests is not None else handle.read()
        view = RunView(rid, handle, token, doc, digests)
        self._cached = view
        return view

    def close(self) -> None:
        self.backend.close()


class RunView:
    """One read of a run: its document (or digests) and how to read some units whole."""

    __slots__ = ("_counts", "_memo", "digests", "doc", "handle", "run_id", "token")

    def __init__(self, rid: str, handle: RunHandle, token: object, doc: Doc, digests: Digests | None) -> None:
        self.run_id = rid
        self.handle = handle
        self.token = token
        self.doc = doc
        self.digests = digests
        self._counts: dict[str | None, int] = {}
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, make: Callable[[], T]) -> T:
        """``make()``, computed once for this read of the run (a resume set paged through)."""
        if key not in self._memo:
            self._memo[key] = make()
        got: T = self._memo[key]
        return got

    def count(self, state: str | None) -> int:
        """How many units are in ``state`` (``view.units.unit_bucket``; None: all), counted once."""
        if state not in self._counts:
            from resumable.view.units import unit_bucket

            units = self.units
            self._counts[state] = len(units) if state is None else sum(
                1 for u in units.values() if unit_bucket(u) == state)
        return self._counts[state]

    @property
    def units(self) -> dict[str, Any]:
        units = self.doc.get("units")
        return units if isinstance(units, dict) else {}

    def whole(self, ids: list[str]) -> dict[str, Any]:
        """The whole values of these units (the run read again if it moved on meanwhile)."""
        if self.digests is None:
            units = self.units
            return {u: units[u] for u in ids if u in units}
        got = self.digests.units(ids)
        if got is None:
            fresh = self.handle.read().get("units")
            return {u: fresh[u] for u in ids if u in fresh} if isinstance(fresh, dict) else {}
        return dict(got)


def lease_verdict(bound: BoundStore, picked: discovery.Picked) -> Any:
    """``view.liveness``'s verdict on a live run (None for a run that is not live)."""
    from resumable.view import liveness
    from resumable.view.status import LIVE

    doc = picked.entry.doc
    if doc is None or doc.get("status") not in LIVE:
        return None
    return liveness.judge(doc, discovery.lease_of(bound.backend, picked.entry))
