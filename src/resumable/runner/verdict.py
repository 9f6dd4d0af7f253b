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
no glob or directory input (a new file could match), every file's stat the one its unit recorded
and none modified in the last seconds (a file written again within the file system's timestamp
granularity keeps its mtime); never for a job that reconciles with git (git answers, not files).
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
    from resumable.runner.jobfile import Job
    from resumable.runner.options import RunOptions
    from resumable.store.backend import Backend, RunHandle

FORMAT = 2
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

    __slots__ = ("backend", "doc", "rest")

    def __init__(self, backend: Backend, doc: Mapping[str, Any], rest: list[bytes]) -> None:
        self.backend = backend
        self.doc = doc
        self.rest = rest  # the ids, the paths and the stats, as ``_encode`` wrote them

    @property
    def name(self) -> str:
        return str(self.doc["name"])

    def current(self, handle: RunHandle) -> bool:
        """Whether the run's files and every input and artifact are as they were."""
        if run_files(handle) != self.doc["run"]:
            return False
        _ids, paths, stats = self.rest
        now = _stats(paths.decode("utf-8", "surrogateescape").split("\0") if paths else [])
        try:
            return now == [int(x) for x in stats.split()]
        except ValueError:
            return False

    def ids(self) -> list[str]:
        ids = self.rest[0].decode("utf-8", "surrogateescape")
        return ids.split("\t") if ids else []


def _encode(doc: Mapping[str, Any], ids: Sequence[str], paths: Sequence[str], stats: Sequence[int]) -> bytes:
    """A small JSON line, then the ids (a step id has no tab), the paths (no path has a NUL) and the
    stats, a line each: a large job's answer is read without decoding thousands of JSON values
    (which would import orjson, tens of milliseconds, for a document this size)."""
    return b"\n".join((jsonio.dumps(doc), "\t".join(ids).encode("utf-8", "surrogateescape"),
                       "\0".join(paths).encode("utf-8", "surrogateescape"),
                       " ".join(map(str, stats)).encode("ascii")))


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
    rest: list[bytes] = []
    try:
        payload = backend.read_cache(_name(cache_name))
        if payload is not None and payload.count(b"\n") == 3:
            head, *rest = payload.split(b"\n")
            doc = jsonio.loads(head)
    except (OSError, ValueError):
        doc = None
    if not (isinstance(doc, dict) and doc.get("v") == FORMAT and doc.get("key") == _key(job_key, opts.targets)
            and isinstance(doc.get("name"), str)):
        backend.close()
        return None
    return Found(backend, doc, rest)


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
    if launch is None:  # --dry-run: every selected step's line, then the count
        ids = found.ids()
        others = int(doc["total"]) - len(ids)
        rest = f", {others} not selected" if others else ""
        lines = [f"skip  {sid}: done" for sid in ids]
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
    from resumable.runner import jobcache

    job_key = jobcache.last_key()
    if job_key is None or job.reconcile is not None or not eligible(opts):
        return
    found = _files(work, units, decisions)
    if found is None:
        return
    paths, stats = found
    if any("\n" in p or "\0" in p for p in paths):
        return  # the paths are stored NUL-separated on one line
    run = run_files(handle)
    if run is None or run != before or not _settled(stats):
        return
    doc = {"v": FORMAT, "key": _key(job_key[1], opts.targets), "name": job.name, "run": run,
           "total": len(job.steps), "launch": launch, "summary": summary}
    try:
        backend.write_cache(_name(job_key[0]), _encode(doc, [s.id for s in work.steps], paths, stats))
    except (OSError, ValueError):
        pass  # a cache: the next re-run takes the long way


def _settled(stats: Sequence[int]) -> bool:
    """No file modified in the last seconds (see ``_RACY_NS``)."""
    now = time.time_ns()
    return all(now - m > _RACY_NS for m in stats[1::3])


def _files(work: Job, units: Mapping[str, Any], decisions: Mapping[str, Decision]
           ) -> tuple[list[str], list[int]] | None:
    """(every input and artifact path the decisions rest on, their (size, mtime_ns, inode) flat as
    the decisions saw them, each the one its unit recorded); None when the answer is not one to
    keep. Stats taken afterwards would vouch for a file that changed since it was decided."""
    from resumable.runner.fingerprint import resolve, same_stat
    from resumable.runner.inputs import is_glob

    if len(decisions) != len(work.steps):
        return None
    paths: list[str] = []
    stats: list[int] = []
    for d in decisions.values():
        if d.run or d.reason != "done" or d.refresh is not None:
            return None
    for step in work.steps:
        if not step.inputs and not step.artifacts:
            continue
        unit = units.get(step.id)
        if not isinstance(unit, dict):
            return None
        if step.inputs:
            files = work.input_files.get(step.id, ())
            stored = (unit.get("fingerprint") or {}).get("inputs")
            if len(files) != len(step.inputs) or not isinstance(stored, dict):
                return None
            for pattern, f in zip(step.inputs, files, strict=True):
                if is_glob(pattern) or f.name != pattern or not same_stat(stored.get(f.name), f.st) \
                        or f.st.st_mode & 0o170000 != 0o100000:
                    return None  # a glob or a directory, or a file that changed since its record
                paths.append(f.path)
                stats += (f.st.st_size, f.st.st_mtime_ns, f.st.st_ino)
        for a in step.artifacts:
            path = resolve(step, a)
            record = (unit.get("artifacts") or {}).get(a)
            try:
                st = os.stat(path)
            except OSError:
                return None
            if not same_stat(record, st):
                return None
            paths.append(path)
            stats += (st.st_size, st.st_mtime_ns, st.st_ino)
    return paths, stats
