"""Plain values that cross the storage seam (see ``store.backend`` for the protocols).

No ``typing`` import here: the low-level verbs load this module on every call, and ``typing`` alone costs
a noticeable share of a ``resumable unit`` call.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.core.types import Event as Event
    from resumable.core.types import RunDocument

    Doc = RunDocument
else:
    Event = Doc = dict


# The format (``v``) of the file store's runner lease file (``store.files.lease``); `resumable doctor`,
# which reads lease files without taking them, judges them by it too.
LEASE_FORMAT = 2


class Record:
    """One entry of a run's history: its sequence number, the event, and the stored text."""

    __slots__ = ("event", "raw", "seq")

    def __init__(self, seq: int, event: Event, raw: str) -> None:
        self.seq = seq
        self.event = event
        self.raw = raw  # the record as stored (a journal line, or the row as JSON)


class RunEntry:
    """One run as a listing sees it: its document, or why it could not be read (``doc is None``)."""

    __slots__ = ("doc", "error", "location", "name", "newer", "sort_key")

    def __init__(self, name: str, location: str, doc: Doc | None, error: str | None, sort_key: str, *,
                 newer: bool = False) -> None:
        self.name = name  # what a user types to pick it (a file name in a runs directory, a run id)
        self.location = location  # where it lives, for people
        self.doc = doc
        self.error = error
        # Unreadable because a newer resumable wrote it (NewerFormatError): upgrading is the remedy.
        self.newer = newer
        self.sort_key = sort_key  # newest first: updatedAt, else createdAt, else the store's own time

    @property
    def run_id(self) -> str:
        rid = self.doc.get("id") if self.doc is not None else None
        if isinstance(rid, str) and rid:
            return rid
        return self.name[:-5] if self.name.endswith(".json") else self.name


class LeftoverGroup:
    """A process group a runner started, recorded so that a later runner can stop it if that runner
    dies. ``secret`` is the recording runner's secret, which every process of the group carries in its
    environment: a process is only ever signalled when it is proven to carry it."""

    __slots__ = ("pgid", "secret", "start")

    def __init__(self, pgid: int, start: str | None, secret: str) -> None:
        self.pgid = pgid
        self.start = start  # the group leader's start time (/proc/<pid>/stat), against pid reuse
        self.secret = secret

    def to_json(self) -> dict[str, object]:
        return {"pgid": self.pgid, "start": self.start, "secret": self.secret}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeftoverGroup) and (self.pgid, self.start, self.secret) == (
            other.pgid, other.start, other.secret)

    def __hash__(self) -> int:
        return hash((self.pgid, self.start, self.secret))


class GcResult:
    __slots__ = ("archive", "moved")

    def __init__(self, moved: int, archive: str) -> None:
        self.moved = moved  # -1: there is nothing to collect from (no runs directory)
        self.archive = archive
