"""Reading the ledger: scan a run directory, load a checkpoint file, find the newest valid attempt,
list a ticket's runs. Readers take no lock and change nothing on disk.

A file is *valid* when it is a regular file, parses as YAML, passes ``model.build`` and agrees with
its own name and directories (phase, ordinal, attempt, run id, ticket id: a file copied or renamed
into the wrong place would otherwise vouch for a phase it does not describe). Anything else is
corrupt, and readers skip it with a warning: OmniNode's reader read only the highest attempt and failed when
that one was damaged, and skipped corrupt files silently when counting attempts.

Order: runs by first write (the oldest checkpoint file's mtime, then run id), then phase ordinal,
then attempt, compared as numbers (OmniNode sorted runs in directory order and phases not at all).
"""

from __future__ import annotations

import os

import msgspec

from resumable.errors import InvalidInputError
from resumable.ledger import dirs, layout, yamlfmt
from resumable.ledger.model import Checkpoint, Schema, build

# A checkpoint is a few hundred bytes; a multi-megabyte file under that name was not written by us.
MAX_FILE_BYTES = 4 << 20


class StoredFile(msgspec.Struct, frozen=True):
    ticket_id: str
    run_id: str
    name: str
    ordinal: int
    phase: str
    attempt: int
    mtime_ns: int
    checkpoint: Checkpoint | None
    problem: str | None

    @property
    def rel(self) -> str:
        """The path relative to the base directory (OmniNode's ``checkpoint_path``)."""
        return f"{self.ticket_id}/{self.run_id}/{self.name}"

    @property
    def corrupt_message(self) -> str:
        return f"Corrupt checkpoint file {self.rel}: {self.problem}"


class StoredRun(msgspec.Struct, frozen=True):
    run_id: str
    first_write_ns: int
    files: tuple[StoredFile, ...]
    problem: str | None = None  # set for a run directory's name holding something else (then no files)


class Entry(msgspec.Struct, frozen=True):
    name: str
    ordinal: int
    phase: str
    attempt: int
    planted: str | None = None  # what the entry is when it is not a regular file ("a FIFO", ...)


def scan(run_fd: int, where: str, prefix: str = "phase_") -> tuple[list[Entry], list[str]]:
    """(checkpoint entries whose name starts with ``prefix``, temp-file names). An entry with a
    checkpoint's name that is not a regular file (a planted directory, FIFO or link) is an entry
    too, marked ``planted``: readers skip it as corrupt, and the writer steps over its attempt
    number, so it blocks neither the other attempts nor the other runs of the ticket."""
    entries: list[Entry] = []
    temps: list[str] = []
    try:
        listing = os.scandir(run_fd)
    except OSError as exc:
        raise dirs.translate(exc, f"cannot list {where}") from exc
    with listing:
        for item in listing:
            name = item.name
            if name.startswith(prefix):
                parsed = layout.parse_file_name(name)
                if parsed is None:
                    continue
                planted = None
                if not item.is_file(follow_symlinks=False):
                    try:
                        planted = dirs.kind_of(item.stat(follow_symlinks=False).st_mode)
                    except OSError:
                        continue  # gone since the listing
                entries.append(Entry(name, *parsed, planted=planted))
            elif layout.is_temp_name(name):
                temps.append(name)
    return entries, temps


def load(run_fd: int, ticket_id: str, run_id: str, entry: Entry, schema: Schema, base: str) -> StoredFile:
    where = f"{base}/{ticket_id}/{run_id}/{entry.name}"

    def stored(checkpoint: Checkpoint | None, problem: str | None, mtime_ns: int = 0) -> StoredFile:
        return StoredFile(ticket_id, run_id, entry.name, entry.ordinal, entry.phase, entry.attempt, mtime_ns,
                          checkpoint, problem)

    if entry.planted is not None:
        return stored(None, dirs.planted_problem(entry.planted, "a checkpoint file"), _mtime(run_fd, entry.name))
    try:
        fd = dirs.open_regular(run_fd, entry.name, where)
    except dirs.Planted as exc:  # swapped in since the scan
        return stored(None, dirs.planted_problem(exc.kind, "a checkpoint file"), _mtime(run_fd, entry.name))
    try:
        mtime_ns = os.fstat(fd).st_mtime_ns
        try:
            data = dirs.read_fd(fd, MAX_FILE_BYTES)
        except OSError as exc:
            raise dirs.translate(exc, f"cannot read {where}") from exc
    finally:
        os.close(fd)

    if data is None:
        return stored(None, f"larger than {MAX_FILE_BYTES >> 20} MiB", mtime_ns)
    checkpoint, problem = parse_file(data, schema)
    if checkpoint is None:
        return stored(None, problem, mtime_ns)
    mismatch = _name_mismatch(checkpoint, entry, ticket_id, run_id, schema)
    if mismatch:
        return stored(None, mismatch, mtime_ns)
    return stored(checkpoint, None, mtime_ns)


def _mtime(parent_fd: int, name: str) -> int:
    try:
        return os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mtime_ns
    except OSError:
        return 0


def parse_file(data: bytes, schema: Schema) -> tuple[Checkpoint | None, str | None]:
    """(checkpoint, None) for the bytes of a valid checkpoint file, else (None, why not)."""
    try:
        document = yamlfmt.load(data)
    except (yamlfmt.YAMLError, RecursionError, ValueError):
        return None, "invalid YAML"
    if not isinstance(document, dict):
        return None, f"expected mapping, got {type(document).__name__}"
    checkpoint, errors = build(document, schema)
    if checkpoint is None:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return None, f"{errors[0]}{more}"
    return checkpoint, None


def _name_mismatch(checkpoint: Checkpoint, entry: Entry, ticket_id: str, run_id: str, schema: Schema) -> str | None:
    expected = layout.file_name(schema.ordinal(checkpoint.phase) or 0, checkpoint.phase, checkpoint.attempt_number)
    if expected != entry.name:
        return f"its contents are those of {expected}, not of its file name"
    if str(checkpoint.run_id) != run_id:
        return f"its run_id {checkpoint.run_id} is not its directory's"
    if checkpoint.ticket_id != ticket_id:
        return f"its ticket_id {checkpoint.ticket_id!r} is not its directory's"
    return None


class RunReader:
    """The open directories of one ticket (and run): a context manager closing their descriptors."""

    def __init__(self, base: str, ticket_id: str) -> None:
        self.base = base
        self.ticket_id = ticket_id
        self._fds: list[int] = []
        self.ticket_fd: int | None = None

    def __enter__(self) -> RunReader:
        base_fd = dirs.open_base(self.base, create=False)
        if base_fd is None:
            return self
        self._fds.append(base_fd)
        self.ticket_fd = dirs.open_child(base_fd, self.ticket_id, f"{self.base}/{self.ticket_id}", create=False)
        if self.ticket_fd is not None:
            self._fds.append(self.ticket_fd)
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in reversed(self._fds):
            os.close(fd)
        self._fds.clear()

    def open_run(self, run_id: str) -> int | None:
        if self.ticket_fd is None:
            return None
        fd = dirs.open_child(self.ticket_fd, run_id, f"{self.base}/{self.ticket_id}/{run_id}", create=False)
        if fd is not None:
            self._fds.append(fd)
        return fd

    def run_ids(self) -> list[str]:
        """The names of the ticket's run directories (canonical UUIDs), whatever they hold:
        ``open_run`` refuses one that is not a directory."""
        if self.ticket_fd is None:
            return []
        import uuid

        found = []
        where = f"{self.base}/{self.ticket_id}"
        try:
            listing = os.scandir(self.ticket_fd)
        except OSError as exc:
            raise dirs.translate(exc, f"cannot list {where}") from exc
        with listing:
            for item in listing:
                try:
                    canonical = str(uuid.UUID(item.name)) == item.name
                except ValueError:
                    canonical = False
                if canonical:
                    found.append(item.name)
        return found

    def read_run(self, run_id: str, schema: Schema) -> StoredRun | None:
        run_fd = self.open_run(run_id)
        if run_fd is None:
            return None
        entries, _ = scan(run_fd, f"{self.base}/{self.ticket_id}/{run_id}")
        entries.sort(key=lambda e: (e.ordinal, e.attempt, e.name))
        files = tuple(load(run_fd, self.ticket_id, run_id, e, schema, self.base) for e in entries)
        first = min((f.mtime_ns for f in files), default=0)
        return StoredRun(run_id, first, files)


def read_ticket(base: str, ticket_id: str, run_id: str | None, schema: Schema) -> list[StoredRun]:
    """Every run of a ticket (or just ``run_id``) with every checkpoint file, in ledger order. Over
    the whole ticket, a run directory's name holding something planted is a run with a ``problem``
    (one planted entry must not hide the other runs); ``run_id``'s own is refused (``Planted``)."""
    runs: list[StoredRun] = []
    with RunReader(base, ticket_id) as reader:
        for rid in [run_id] if run_id is not None else reader.run_ids():
            try:
                run = reader.read_run(rid, schema)
            except dirs.Planted as exc:
                if run_id is not None:
                    raise
                assert reader.ticket_fd is not None
                problem = dirs.planted_problem(exc.kind, "a run directory")
                run = StoredRun(rid, _mtime(reader.ticket_fd, rid), (), problem)
            if run is not None and (run.files or run.problem):
                runs.append(run)
    runs.sort(key=lambda r: (r.first_write_ns, r.run_id))
    return runs


class PhaseRead(msgspec.Struct, frozen=True):
    found: StoredFile | None
    skipped: tuple[StoredFile, ...]  # newer attempts that are corrupt
    run_exists: bool


def newest_valid(base: str, ticket_id: str, run_id: str, phase: str, schema: Schema) -> PhaseRead:
    ordinal = schema.ordinal(phase)
    if ordinal is None:
        raise InvalidInputError(schema.phases.invalid_phase(phase))
    with RunReader(base, ticket_id) as reader:
        run_fd = reader.open_run(run_id)
        if run_fd is None:
            return PhaseRead(None, (), False)
        where = f"{base}/{ticket_id}/{run_id}"
        entries, _ = scan(run_fd, where, layout.phase_prefix(ordinal, phase))
        entries = [e for e in entries if e.phase == phase and e.ordinal == ordinal]
        entries.sort(key=lambda e: (e.attempt, e.name), reverse=True)
        skipped: list[StoredFile] = []
        for entry in entries:
            stored = load(run_fd, ticket_id, run_id, entry, schema, base)
            if stored.checkpoint is not None:
                return PhaseRead(stored, tuple(skipped), True)
            skipped.append(stored)
    return PhaseRead(None, tuple(skipped), True)
