"""A re-run with nothing to do, answered without parsing the job or decoding the run.

Once a run is done, a re-run that finds every step done and current reads the job file, parses it
(or its cache), decodes the whole run (85 MB of snapshot at 100,000 steps), decides each step and
prints one line: seconds that grow with the run, to say that nothing changed. So when a re-run
(or a ``--dry-run``) finds exactly that, it keeps its answer in the runs directory's cache
(``Backend.read_cache``), under a key of everything the answer depends on:

- the job file's cache key (``jobcache.cache_key``: its bytes, its resolved path, ``--job``,
  ``$HOME``, the parser's files), the target steps, and this module's and the planner's own files;
- the run's files as they were: the journal, the snapshot and ulpi's event log, each by (inode,
  size, mtime_ns). Every write to a run appends to its journal (its size changes), and an edit of
  the snapshot by another program (``jq ... > tmp && mv tmp file``) gives it another inode;
- every input and artifact file by (size, mtime_ns, inode), as the fingerprint compares them.

The next re-run stats those files and, when every one is as it was, gives the same answer:
make's cost (a stat per file), not a parse and a decode per step. Anything else, or any doubt,
takes the long way, which is exact and may keep a new answer. An answer is kept only when it is
certain to be the same the long way would give: every step skipped as ``done``, nothing to write,
no glob or directory input (a new file could match), every file's stat the one its unit recorded;
never for a job that reconciles with git (git answers, not files).

A run that ends with every step done keeps the answer too (``keep_run``), from the document and
the fingerprints it holds, with the run's files as its last write left them: the first re-run
after a run is answered so, not only the later ones. Its last steps' artifacts were written a
moment ago, and a file written again within the file system's timestamp granularity keeps its
size, mtime and inode. Such a file (modified within ``_RACY_NS`` of the answer) is kept with the
content hash its unit recorded, as git keeps a "racily clean" index entry: the next re-run hashes
those few files again and compares. A file whose hash differs is named to the long way
(``smudged``), which then hashes it rather than trust its stat, and runs its step again.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resumable.core import jsonio

if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.runner.explain import Decision
    from resumable.runner.inputs import InputFile
    from resumable.runner.jobfile import Job, Step
    from resumable.runner.options import RunOptions
    from resumable.store.backend import Backend, RunHandle

FORMAT = 3
_RACY_NS = 2_000_000_000  # as the fingerprint's: a file this recent may change within its mtime


def _code_version() -> str:
    """The files of this module and of what decides a step (size and mtime): another resumable,
    another key."""
    from resumable.core import policy
    from resumable.runner import conclude, explain, fingerprint, inputs, session

    out = []
    for module in (__file__, explain.__file__, fingerprint.__file__, inputs.__file__, session.__file__,
                   policy.__file__, conclude.__file__):
        st = os.stat(module)
        out.append(f"{st.st_size}:{st.st_mtime_ns}")
    return ",".join(out)


def _name(job_cache_name: str) -> str:
    return "verdict." + job_cache_name.partition(".")[2]


def _key(job_key: str, targets: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in (str(FORMAT), _code_version(), job_key, *targets):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def run_files(handle: RunHandle) -> list[int] | None:
    """(inode, size, mtime_ns) of the run's journal, snapshot and ulpi event log, flat (-1 for
    one that is absent); None for a store that is not a runs directory."""
    files = getattr(handle, "files", None)
    if files is None:
        return None
    out: list[int] = []
    for path in (files.journal, files.snapshot, files.events):
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            out += (-1, -1, -1)
            continue
        out += (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def _stats(paths: Sequence[str]) -> list[int] | None:
    """(size, mtime_ns, inode) of every file, flat; None when one cannot be stat'ed."""
    out: list[int] = []
    st = os.stat
    try:
        for p in paths:
            s = st(p)
            out += (s.st_size, s.st_mtime_ns, s.st_ino)
    except OSError:
        return None
    return out


# --- the fast answer ------------------------------------------------------------------------


class Found:
    """A kept answer whose key matches this invocation's job and targets (not yet its files)."""

    __slots__ = ("backend", "cache", "changed", "doc", "head", "rest", "settled")

    def __init__(self, backend: Backend, cache: str, head: bytes, doc: Mapping[str, Any], rest: list[bytes]) -> None:
        self.backend = backend
        self.cache = cache  # the name it is kept under
        self.head = head
        self.doc = doc
        self.rest = rest  # the ids, the paths, the stats and the racy files' hashes (``_encode``)
        # Files whose stat is the one kept but whose content is not: the long way must hash them.
        self.changed: list[str] = []
        # Every racy file hashed again, the same, and now older than ``_RACY_NS``: its hash need
        # not be kept any longer (a later write would give it a later mtime).
        self.settled = False

    @property
    def name(self) -> str:
        return str(self.doc["name"])

    def current(self, handle: RunHandle) -> bool:
        """Whether the run's files and every input and artifact are as they were."""
        _ids, paths, stats, racy = self.rest
        names = paths.decode("utf-8", "surrogateescape").split("\0") if paths else []
        now = _stats(names)
        try:
            was = [int(x) for x in stats.split()]
            hashes = [(int(i), sha.decode("ascii")) for i, _, sha in (x.partition(b":") for x in racy.split())]
        except (ValueError, UnicodeDecodeError):
            return False
        if now is None or len(now) != len(was):
            return False
        # Checked whatever else changed: a file edited within its mtime tick is seen only here.
        limit = time.time_ns() - _RACY_NS
        self.settled = bool(hashes)
        for i, sha in hashes:
            self.settled = self.settled and 0 <= i < len(names) and was[3 * i + 1] < limit
            if 0 <= i < len(names) and now[3 * i:3 * i + 3] == was[3 * i:3 * i + 3] \
                    and _sha256_file(names[i]) != sha:
                self.changed.append(names[i])
        return not self.changed and now == was and run_files(handle) == self.doc["run"]

    def settle(self) -> None:
        """Keep the answer again without the hashes of racy files that have settled (best effort):
        the next re-runs stat them only."""
        if not self.settled:
            return
        try:
            self.backend.write_cache(self.cache, b"\n".join((self.head, *self.rest[:3], b"")))
        except (OSError, ValueError):
            pass

    def ids(self) -> list[str]:
        ids = self.rest[0].decode("utf-8", "surrogateescape")
        return ids.split("\t") if ids else []


def _sha256_file(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


class Files:
    """The input and artifact files an answer rests on: their paths, their (size, mtime_ns, inode)
    flat, and the content hash each one's unit recorded."""

    __slots__ = ("paths", "shas", "stats")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.stats: list[int] = []
        self.shas: list[str | None] = []

    def add(self, path: str, st: os.stat_result, sha: str | None) -> None:
        self.paths.append(path)
        self.stats += (st.st_size, st.st_mtime_ns, st.st_ino)
        self.shas.append(sha)

    def racy(self) -> list[str] | None:
        """``index:sha256`` of every file modified in the last moments (``_RACY_NS``): a write
        within its mtime tick would leave its stat as it is, so its content is compared too; None
        when such a file has no recorded hash (the answer is not kept)."""
        now = time.time_ns()
        out = []
        for i, m in enumerate(self.stats[1::3]):
            if now - m <= _RACY_NS:
                sha = self.shas[i]
                if not isinstance(sha, str) or not sha.isalnum():
                    return None
                out.append(f"{i}:{sha}")
        return out


def _encode(doc: Mapping[str, Any], ids: Sequence[str], files: Files, racy: Sequence[str]) -> bytes:
    """A small JSON line, then the ids (a step id has no tab), the paths (no path has a NUL), the
    stats and the racy files' hashes, a line each: a large job's answer is read without decoding
    thousands of JSON values (which would import orjson, tens of milliseconds, for a document
    this size)."""
    return b"\n".join((jsonio.dumps(doc), "\t".join(ids).encode("utf-8", "surrogateescape"),
                       "\0".join(files.paths).encode("utf-8", "surrogateescape"),
                       " ".join(map(str, files.stats)).encode("ascii"), " ".join(racy).encode("ascii")))


def eligible(opts: RunOptions) -> bool:
    return not (opts.steps or opts.force or opts.explain or opts.status or opts.reset or opts.verbose
                or opts.stream or opts.store)


def find(opts: RunOptions) -> Found | None:
    """The kept answer for this invocation's job file and targets, or None (then the caller takes
    the long way). The store it was found in stays open in the answer."""
    from resumable import store
    from resumable.errors import ResumableError
    from resumable.runner import jobcache
    from resumable.runner.jobfile import DEFAULT_JOB_FILE, read_job_bytes

    if opts.jobfile:
        p = Path(opts.jobfile)
    else:
        from resumable.runner.joblocate import find_job_file

        found = find_job_file(DEFAULT_JOB_FILE)
        if found is None:
            return None
        p = Path(found)
    try:
        data = read_job_bytes(p)
        resolved = p.resolve()
        backend = store.open_backend(opts.state_dir, start=str(resolved.parent))
    except (ResumableError, OSError):
        return None  # the long way says what is wrong
    cache_name, job_key = jobcache.cache_key(resolved, data, opts.job)
    doc: Any = None
    head = b""
    rest: list[bytes] = []
    try:
        payload = backend.read_cache(_name(cache_name))
        if payload is not None and payload.count(b"\n") == 4:
            head, *rest = payload.split(b"\n")
            doc = jsonio.loads(head)
    except (OSError, ValueError):
        doc = None
    if not (isinstance(doc, dict) and doc.get("v") == FORMAT and doc.get("key") == _key(job_key, opts.targets)
            and isinstance(doc.get("name"), str)):
        backend.close()
        return None
    return Found(backend, _name(cache_name), head, doc, rest)


def answer(found: Found, opts: RunOptions, launch: Mapping[str, Any] | None) -> int | None:
    """Print what the long way would print for this run, if the kept answer still holds, and
    return the exit code; None when it does not (nothing printed)."""
    from resumable.core.text import escape_controls

    doc = found.doc
    if launch is not None and (doc.get("launch") != launch or not isinstance(doc.get("summary"), str)):
        return None
    handle = found.backend.open(found.name)
    if not found.current(handle):
        return None
    found.settle()
    if launch is None:  # --dry-run: every selected step's line, then the count
        ids = found.ids()
        others = int(doc["total"]) - len(ids)
        rest = f", {others} not selected" if others else ""
        from resumable.runner.familyview import done_lines

        lines = done_lines(ids)  # a family of steps is a line, as the long way prints it
        lines.append(f"0 to run, {len(ids)} to skip{rest} (dry run: nothing executed or written)")
        sys.stdout.write("\n".join(map(escape_controls, lines)) + "\n")
        return 0
    if not opts.quiet:
        from resumable.runner.display import LiveReporter, make_reporter, skip_summary

        reporter = make_reporter(opts.quiet)
        if not isinstance(reporter, LiveReporter):  # plain lines: the skip summary is all it prints
            n = len(found.ids())
            if n:
                print(escape_controls(skip_summary(n, n)), flush=True)
        else:
            from resumable.runner.explain import Decision

            decisions = {sid: Decision(sid, False, "done") for sid in found.ids()}
            reporter.start(None, decisions, {})  # type: ignore[arg-type]  # the job is not read
            reporter.close()
    print(doc["summary"])
    return 0


# --- keeping an answer --------------------------------------------------------------------------


def keep(job: Job, work: Job, opts: RunOptions, backend: Backend, handle: RunHandle,
         units: Mapping[str, Any], decisions: Mapping[str, Decision], before: list[int] | None,
         launch: Mapping[str, Any] | None = None, summary: str | None = None) -> None:
    """Keep this answer (every step skipped as done) for the next re-run, when it is certain to
    be the same then as the long way's (see the module's docstring); best effort. ``before``: the
    run's files (``run_files``) before its document was loaded: a write since (a unit verb takes
    no runner lease) leaves the answer unkept. ``launch`` and ``summary``: a run that had nothing
    to do (else a --dry-run, which answers only dry runs)."""
    if not _may_keep(job, opts):
        return
    files = _files(work, units, decisions)
    if files is None:
        return
    run = run_files(handle)
    if run is None or run != before:
        return
    _write(job, work, opts, backend, run, files, launch, summary)


def _may_keep(job: Job, opts: RunOptions) -> bool:
    from resumable.runner import jobcache

    return jobcache.last_key() is not None and job.reconcile is None and eligible(opts)


def _write(job: Job, work: Job, opts: RunOptions, backend: Backend, run: list[int], files: Files,
           launch: Mapping[str, Any] | None, summary: str | None) -> None:
    from resumable.runner import jobcache

    job_key = jobcache.last_key()
    for path, st in job.scanned:  # a family's files: a file added or removed there changes its directory
        files.add(path, st, None)
    racy = files.racy()
    if job_key is None or racy is None or any("\n" in p or "\0" in p for p in files.paths):
        return  # the paths are stored NUL-separated on one line
    doc = {"v": FORMAT, "key": _key(job_key[1], opts.targets), "name": job.name, "run": run,
           "total": len(job.steps), "launch": launch, "summary": summary}
    try:
        backend.write_cache(_name(job_key[0]), _encode(doc, [s.id for s in work.steps], files, racy))
    except (OSError, ValueError):
        pass  # a cache: the next re-run takes the long way


def _files(work: Job, units: Mapping[str, Any], decisions: Mapping[str, Decision]) -> Files | None:
    """Every input and artifact file the decisions rest on, their stats as the decisions saw them,
    each the one its unit recorded; None when the answer is not one to keep. Stats taken
    afterwards would vouch for a file that changed since it was decided."""
    if len(decisions) != len(work.steps):
        return None
    out = Files()
    for d in decisions.values():
        if d.run or d.reason != "done" or d.refresh is not None:
            return None
    for step in work.steps:
        if not step.inputs and not step.artifacts:
            continue
        unit = units.get(step.id)
        if not isinstance(unit, dict):
            return None
        if step.inputs and not _inputs(step, work.input_files.get(step.id, ()), unit, out):
            return None
        if not _artifacts(step, unit, out):
            return None
    return out


def _artifacts(step: Step, unit: Mapping[str, Any], out: Files) -> bool:
    """Whether every artifact of ``step`` is as its unit recorded it (added to ``out``)."""
    from resumable.runner.fingerprint import record_sha, resolve, same_stat

    records = unit.get("artifacts")
    for a in step.artifacts:
        path = resolve(step, a)
        record = records.get(a) if isinstance(records, dict) else None
        try:
            st = os.stat(path)
        except OSError:
            return False
        if not same_stat(record, st):
            return False
        out.add(path, st, record_sha(record))
    return True


def _inputs(step: Step, files: Sequence[InputFile], unit: Mapping[str, Any], out: Files) -> bool:
    """Add the step's input files to ``out``: False when one is a glob or a directory, or a file
    that is not the one its unit recorded."""
    from resumable.runner.fingerprint import record_sha, same_stat
    from resumable.runner.inputs import is_glob

    stored = (unit.get("fingerprint") or {}).get("inputs")
    if len(files) != len(step.inputs) or not isinstance(stored, dict):
        return False
    for pattern, f in zip(step.inputs, files, strict=True):
        record = stored.get(f.name)
        if is_glob(pattern) or f.name != pattern or not same_stat(record, f.st) \
                or f.st.st_mode & 0o170000 != 0o100000:
            return False  # a glob or a directory, or a file that changed since its record
        out.add(f.path, f.st, record_sha(record))
    return True


# --- the answer of a run that ended with every step done ------------------------------------------


class Ending:
    """What the run's writer held after its last write: its document, and the journal and snapshot
    that write left (a write by anyone since shows in their stats)."""

    __slots__ = ("doc", "journal", "snapshot")

    def __init__(self, doc: Mapping[str, Any], journal: tuple[int, int], snapshot: tuple[int, int, int]) -> None:
        self.doc = doc
        self.journal = journal  # (inode, size)
        self.snapshot = snapshot  # (inode, size, mtime_ns)


def ending(store: RunHandle) -> Ending | None:
    """Flush the snapshot, then what the writer holds; None for a store that is not a runs
    directory, or a state it cannot vouch for (the long way answers the next re-run)."""
    from resumable.errors import ResumableError

    cursor = getattr(getattr(store, "writer", None), "cursor", None)
    if cursor is None:
        return None
    try:
        store.flush()
    except (ResumableError, OSError):
        return None
    state = cursor.state
    if state is None or not isinstance(state.doc, dict) or state.snap_stat is None or state.adopt \
            or state.snap_seq != state.seq or state.torn or not cursor.jino:
        return None
    return Ending(state.doc, (cursor.jino, state.offset), tuple(state.snap_stat))


def keep_run(job: Job, work: Job, opts: RunOptions, backend: Backend, handle: RunHandle, end: Ending,
             launch: Mapping[str, Any]) -> None:
    """Keep the answer the next re-run would give after this run, which ended with every step
    done: ``end`` taken after its last write, this called once the run's files are closed. The
    fingerprints are the run's own, in memory: a stat per input and artifact, a few compares per
    step, no plan."""
    from resumable.runner.conclude import removal_marks, removed_count, summary_of

    doc = end.doc
    units = doc.get("units")
    if not _may_keep(job, opts) or doc.get("status") != "done" or doc.get("launch") != launch \
            or not isinstance(units, dict):
        return
    ids = {s.id for s in work.steps}
    if removal_marks(job, units) or any(not isinstance(u, dict) or u.get("status") != "done"
                                        for uid, u in units.items() if uid not in ids):
        return  # the re-run would write (marks), or would not be nothing to do
    files = _current(work, units)
    if files is None:
        return
    run = run_files(handle)
    if run is None or (run[0], run[1]) != end.journal or tuple(run[3:6]) != end.snapshot:
        return  # written since (by another command, or by the close)
    removed = removed_count(units, {s.id for s in job.steps})
    summary = f"{job.name}: done ({summary_of(['skipped'] * len(work.steps), removed)})"
    _write(job, work, opts, backend, run, files, launch, summary)


def _current(work: Job, units: Mapping[str, Any]) -> Files | None:
    """The files every step's skip would rest on, when every step would be skipped as done the long
    way's first way (``explain.decide``): done, fingerprint unchanged, artifacts as recorded,
    nothing upstream made anything else; None otherwise (or when a file would need hashing)."""
    from resumable.core import policy
    from resumable.runner.explain import upstream_of
    from resumable.runner.fingerprint import done_and_current, unchanged
    from resumable.runner.inputs import expand

    plain = [s for s in work.steps if not s.inputs and not s.artifacts]
    if not all(done_and_current(plain, units)):
        return None
    made = upstream_of(units)
    out = Files()
    for step in work.steps:
        unit = units.get(step.id)
        stored = unit.get("fingerprint") if isinstance(unit, dict) else None
        if step.needs and policy.recorded_upstream(stored) and policy.upstream_changes(stored, made(step.needs)):
            return None
        if not step.inputs and not step.artifacts:
            continue
        if not isinstance(unit, dict) or unit.get("status") != "done":
            return None
        files, missing = expand(step.cwd, step.inputs, step.artifacts)
        if missing or not unchanged(step, stored, files) or (step.inputs and not _inputs(step, files, unit, out)):
            return None
        if not _artifacts(step, unit, out):
            return None
    return out


# --- the long way, told what the kept answer found ---------------------------------------------------


def smudged(work: Job, units: Mapping[str, Any], changed: Sequence[str]) -> Mapping[str, Any]:
    """``units`` with the record of every ``changed`` file (its stat the recorded one, its content
    not) given size -1, as git smudges a racily clean entry: the plan hashes it rather than trust
    its stat. A view for the plan only: the units themselves are left as they are."""
    if not changed:
        return units
    from resumable.runner.fingerprint import resolve

    suspect = set(changed)
    out = dict(units)
    for step in work.steps:
        unit = units.get(step.id)
        if not isinstance(unit, dict) or not (step.inputs or step.artifacts):
            continue
        fp = unit.get("fingerprint")
        inputs = fp.get("inputs") if isinstance(fp, dict) else None
        names = {f.name for f in work.input_files.get(step.id, ()) if f.path in suspect}
        arts = [a for a in step.artifacts if resolve(step, a) in suspect]
        if not names and not arts:
            continue
        new = dict(unit)
        if isinstance(fp, dict) and isinstance(inputs, dict) and names:
            new["fingerprint"] = {**fp, "inputs": {n: _smudge(r) if n in names else r for n, r in inputs.items()}}
        records = unit.get("artifacts")
        if isinstance(records, dict) and arts:
            new["artifacts"] = {a: _smudge(r) if a in arts else r for a, r in records.items()}
        out[step.id] = new
    return out


def _smudge(record: object) -> object:
    if isinstance(record, str):  # an input's "<sha256> <size> <mtime_ns> <inode>"
        parts = record.split(" ")
        return " ".join([parts[0], "-1", *parts[2:]]) if len(parts) == 4 else record
    if isinstance(record, dict):
        return {**record, "size": -1}
    return record
