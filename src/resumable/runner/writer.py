"""Status writes that never stop the work.

The runner's job is the work; its status is bookkeeping. When a write fails (disk full, a quota, an
I/O error), the work goes on: the failed write is queued, the user is warned once, and every later
transition first retries the queue, in order, on a freshly opened handle (a broken file handle must
not poison later attempts). What still could not be saved is reported at the end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.errors import CorruptRunError, NewerFormatError, RefusedError, StoreError

if TYPE_CHECKING:
    from typing import TypeVar

    from resumable.core.types import Attempt, BeginEvent, Event, FinalizeEvent, Launch

    Clocked = TypeVar("Clocked", BeginEvent, FinalizeEvent)
    from resumable.store.backend import RunHandle


@dataclass
class _Pending:
    what: str
    events: list[Event]
    lazy: bool = False


@dataclass
class SafeWriter:
    store: RunHandle
    warn: Callable[[str], None]
    reopen: Callable[[], RunHandle] | None = None  # fresh handles after a failure
    # A deque: after a long disk-full spell thousands of writes wait, and each is popped in O(1).
    queue: deque[_Pending] = field(default_factory=deque)
    warned: bool = False
    dropped: list[str] = field(default_factory=list)  # refused on replay: reported, not retried
    # Why the queued writes are still queued: the last failure (disk full, permissions, I/O).
    last_error: StoreError | OSError | None = None

    @property
    def doc(self) -> Mapping[str, Any]:
        """The run's current document, or {} when it cannot be read (the work goes on)."""
        try:
            doc = self.store.load()
        except (StoreError, OSError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _flush(self) -> bool:
        while self.queue:
            p = self.queue[0]
            try:
                self.store.commit(p.events, lazy_view=p.lazy)
            except RefusedError as exc:
                # A queued write the store now refuses would be refused forever: report, move on.
                self.dropped.append(f"{p.what}: {exc}")
            except (CorruptRunError, NewerFormatError):
                # Not a passing failure: the run's state cannot be read, so which steps are done is
                # unknown, and going on would run done steps again.
                raise
            except (StoreError, OSError) as exc:
                self.last_error = exc
                self._refresh()
                return False
            self.queue.popleft()
        return True

    def _refresh(self) -> None:
        if self.reopen is None:
            return
        try:
            self.store = self.reopen()
        except (StoreError, OSError):
            pass

    def write(self, what: str, events: list[Event], *, lazy: bool = False) -> bool:
        """Commit ``events`` (after anything still queued); False when it had to be queued."""
        self.queue.append(_Pending(what, events, lazy))
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
             deps: Sequence[str] | None = None, attempt: Attempt | None = None,
             fields: Mapping[str, Any] | None = None) -> bool:
        event = verbs.unit(unit_id, state, note=note, deps=list(deps) if deps is not None else None,
                           attempt=attempt, fields=dict(fields) if fields else None)
        # A step starting is journaled (durable, visible to `resumable status`) without a rewrite
        # of the snapshot file; its outcome, a moment later, rewrites it.
        return self.write(f"{unit_id} -> {state}", [event], lazy=state == "in_progress")

    def invalidate(self, unit_id: str, reason: str) -> bool:
        return self.write(f"{unit_id} invalidation", [verbs.invalidate(unit_id, reason)])

    def item(self, items: object) -> bool:
        return self.write("open items", [verbs.item(items)])

    def resolve(self, ids: Sequence[str]) -> bool:
        return self.write("resolve items", [verbs.resolve(list(ids))])

    def begin(self, launch: Launch) -> bool:
        return self.write("begin", [_clocked(verbs.begin(launch))])

    def finalize(self, status: str, result: str | None = None) -> bool:
        return self.write(f"finalize {status}", [_clocked(verbs.finalize(status, result))])

    def retry(self) -> bool:
        return self._flush()

    def unsaved(self) -> list[str]:
        return [p.what for p in self.queue]

    def disk_full(self) -> bool:
        """Whether the writes still queued failed for want of space (ENOSPC, EDQUOT)."""
        import errno

        from resumable.errors import DiskFullError

        exc = self.last_error
        return isinstance(exc, DiskFullError) or (
            isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT))


def _clocked(event: Clocked) -> Clocked:
    """The event with its time in milliseconds (``clock``): a session's length is counted from
    these, so that a run of 0.8 s does not read as 0 or 1 s."""
    import time

    from resumable.core.stamps import stamp

    event["clock"] = stamp(time.time(), ms=True)
    return event
