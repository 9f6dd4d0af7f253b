"""Status writes that never stop the work.

The runner's job is the work; its status file is bookkeeping. When a write fails (disk full, a
quota, an I/O error), the work goes on: the failed write is queued, the user is warned once, and
every later transition first retries the queue, in order, on a freshly opened run (a broken file
handle must not poison later attempts). What still could not be saved is reported at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from resumable.errors import RefusedError, StoreError


class RunStore(Protocol):
    """The part of ``resumable.api.Run`` the scheduler writes through (test fakes implement it)."""

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
    ) -> None: ...

    def invalidate(self, unit_id: str, reason: str) -> None: ...

    def init(self, task: str, *, units: Sequence[str] = (), run_id: str | None = None,
             launch: dict[str, Any] | None = None, required_phases: Sequence[str] = (),
             require_validation: bool = False) -> str: ...

    def begin(self, launch: dict[str, Any] | None = None) -> None: ...

    def item(self, items: object) -> list[str]: ...

    def resolve(self, ids: Sequence[str]) -> list[str]: ...

    def finalize(self, status: str, result: str | None = None) -> None: ...

    def close(self) -> None: ...

    @property
    def doc(self) -> dict[str, Any]: ...


@dataclass
class _Pending:
    what: str
    call: Callable[[RunStore], object]


@dataclass
class SafeWriter:
    store: RunStore
    warn: Callable[[str], None]
    reopen: Callable[[], RunStore] | None = None  # fresh handles after a failure
    queue: list[_Pending] = field(default_factory=list)
    warned: bool = False
    dropped: list[str] = field(default_factory=list)  # refused on replay: reported, not retried

    def _flush(self) -> bool:
        while self.queue:
            p = self.queue[0]
            try:
                p.call(self.store)
            except RefusedError as exc:
                # A queued write the store now refuses would be refused forever: report, move on.
                self.dropped.append(f"{p.what}: {exc}")
            except (StoreError, OSError):
                self._refresh()
                return False
            self.queue.pop(0)
        return True

    def _refresh(self) -> None:
        if self.reopen is None:
            return
        try:
            self.store = self.reopen()
        except (StoreError, OSError):
            pass

    def _do(self, what: str, call: Callable[[RunStore], object]) -> bool:
        self.queue.append(_Pending(what, call))
        if self._flush():
            return True
        if not self.warned:
            self.warned = True
            self.warn(
                f"could not save the run's status ({what}); the work goes on and the save will be "
                "retried at every step transition"
            )
        return False

    def unit(self, unit_id: str, state: str, *, note: str | None = None,
             deps: Sequence[str] | None = None, attempt: dict[str, Any] | None = None,
             fields: Mapping[str, Any] | None = None) -> bool:
        f = dict(fields) if fields else None
        d = list(deps) if deps is not None else None
        # A step starting is journaled (durable, visible to `resumable status`) without a rewrite
        # of the snapshot file; its outcome, a moment later, rewrites it.
        lazy = state == "in_progress"
        return self._do(f"{unit_id} -> {state}",
                        lambda s: s.unit(unit_id, state, note=note, deps=d, attempt=attempt, fields=f,
                                         lazy_view=lazy))

    def invalidate(self, unit_id: str, reason: str) -> bool:
        return self._do(f"{unit_id} invalidation", lambda s: s.invalidate(unit_id, reason))

    def item(self, items: list[dict[str, Any]]) -> bool:
        return self._do("open items", lambda s: s.item(items))

    def resolve(self, ids: Sequence[str]) -> bool:
        ids = list(ids)
        return self._do("resolve items", lambda s: s.resolve(ids))

    def call(self, what: str, call: Callable[[RunStore], object]) -> bool:
        return self._do(what, call)

    def finalize(self, status: str, result: str | None = None) -> bool:
        return self._do(f"finalize {status}", lambda s: s.finalize(status, result))

    def retry(self) -> bool:
        return self._flush()

    def unsaved(self) -> list[str]:
        return [p.what for p in self.queue]
