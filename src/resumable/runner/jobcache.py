"""A job file parsed once: its declared steps kept in the store's cache (``Backend.read_cache``),
keyed by the file's bytes.

Parsing and validating a 100,000-step job file takes most of a second; a re-run with nothing to do
must take less than that in all. The cache holds what the file declares (every default applied,
every value validated, needs checked), plus each step's command hash (``fingerprint.command_sha``,
which every re-run compares). It is found by a key over everything the result depends on: the
file's bytes, its resolved path (relative directories and the default job name come from it),
``--job``, ``$HOME`` (``~`` in paths), the parser's own files (another resumable, another key)
and the cache format. Inputs are
expanded on the file system every time, as without the cache. A job file with problems is never
cached: its errors are reported by parsing it, every time.

The store keeps the bytes only if it can prove them intact (checksummed, never read through a
link, the owner's alone); a payload that does not decode as this format is ignored and replaced.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resumable.core import jsonio
from resumable.errors import ResumableError
from resumable.runner import fingerprint
from resumable.runner.jobfile import Declared, Job, Step, finish_job, parse_job, read_job_bytes
from resumable.runner.joblocate import Locator, Problems

if TYPE_CHECKING:
    from collections.abc import Callable

    from resumable.store.backend import Backend

FORMAT = 1
_E: tuple[str, ...] = ()


def cache_key(path: Path, data: bytes, name_override: str | None) -> tuple[str, str]:
    """(the cache's name: one per job file and ``--job``, so an edited file replaces its cache;
    the key its content must carry: everything the parse depends on)."""
    where = hashlib.sha256()
    for part in (str(path), name_override or ""):
        where.update(part.encode("utf-8", "surrogateescape") + b"\0")
    what = where.copy()
    for part in (str(FORMAT), _parser_version(), os.environ.get("HOME", "")):
        what.update(part.encode("utf-8", "surrogateescape") + b"\0")
    what.update(data)
    return f"job.{where.hexdigest()[:32]}", what.hexdigest()


def _parser_version() -> str:
    """The parser's own files as installed (size and mtime): another resumable, another key."""
    from resumable.runner import expand, families, jobfile, jobmodel, jobpython, jobtoml, templates

    out = []
    for module in (jobfile.__file__, __file__, jobmodel.__file__, jobtoml.__file__, expand.__file__,
                   families.__file__, templates.__file__, jobpython.__file__):
        st = os.stat(module)
        out.append(f"{st.st_size}:{st.st_mtime_ns}")
    return ",".join(out)


def load(path: str | os.PathLike[str], name_override: str | None,
         open_store: Callable[[str], Backend]) -> Job:
    """The job of the file at ``path``, from the cache of the store ``open_store(base_dir)``
    opens when it has this very file's, else parsed (and then kept there)."""
    _PENDING.clear()
    _LAST.clear()
    p = Path(path)
    data = read_job_bytes(p)
    resolved = p.resolve()
    name, key = cache_key(resolved, data, name_override)
    _LAST.append((name, key))
    try:
        backend = open_store(str(resolved.parent))
    except (ResumableError, OSError):
        return parse_job(data, p, name_override)[0]  # the run's own opening reports the problem
    try:
        payload = _read(backend, name)
        if payload is not None:
            declared = decode(payload, p, data, key)
            if declared is not None:
                return finish_job(declared, p)
        job, declared = parse_job(data, p, name_override)
        if declared.cacheable:  # not a family (made on every run: its files may change), nor a Python job
            _PENDING[:] = [(open_store, str(resolved.parent), name, declared, key)]
        return job
    finally:
        backend.close()


# The cache of the job parsed last, written by ``keep`` once the run it was parsed for went ahead:
# bad input (a refused runs directory, a run of a newer format) must leave the disk as it was.
# Encoded only then: held through the run, the bytes of a 100,000-step job would weigh some 13 MB.
_PENDING: list[tuple[Callable[[str], Backend], str, str, Declared, str]] = []


# (the cache's name, its key) of the job file loaded last: what a re-run's kept answer is found by
# (``runner.verdict``).
_LAST: list[tuple[str, str]] = []


def last_key() -> tuple[str, str] | None:
    return _LAST[0] if _LAST else None


def forget() -> None:
    """The job is read another way (a database store's runner parses it): no key to keep."""
    _LAST.clear()
    _PENDING.clear()


def keep() -> None:
    """Write the cache of the job parsed last (best effort), if it was parsed rather than read."""
    if not _PENDING:
        return
    open_store, base, name, declared, key = _PENDING.pop()
    payload = encode(declared, key)
    try:
        backend = open_store(base)
    except (ResumableError, OSError):
        return
    try:
        backend.write_cache(name, payload)
    except (OSError, ValueError):
        pass  # a cache: the next run parses again
    finally:
        backend.close()


def _read(backend: Backend, name: str) -> bytes | None:
    try:
        return backend.read_cache(name)
    except (OSError, ValueError):
        return None


def encode(declared: Declared, key: str) -> bytes:
    """The declared steps as compact JSON rows; shells, environments and directories, which most
    steps share, are stored once and referred to by position."""
    shared: dict[str, dict[Any, int]] = {"shells": {}, "envs": {}, "cwds": {}}

    def ref(table: str, value: Any) -> int:
        return shared[table].setdefault(value, len(shared[table]))

    rows = [[s.id, s.command, ref("shells", s.shell), s.needs, s.timeout, s.retries, s.backoff, s.jitter,
             s.grace, s.artifacts, s.inputs, ref("envs", s.env), ref("cwds", s.cwd), s.log,
             fingerprint.command_sha(s)] for s in declared.steps]
    return jsonio.dumps({"v": FORMAT, "key": key, "name": declared.name, "base": str(declared.base),
                         "reconcile": declared.reconcile,
                         **{table: list(values) for table, values in shared.items()}, "steps": rows})


def decode(payload: bytes, p: Path, data: bytes, key: str) -> Declared | None:
    """The declared steps ``encode`` wrote for ``key``, or None (another key, another format)."""
    try:
        doc = jsonio.loads(payload)
        if doc.get("v") != FORMAT or doc.get("key") != key or not isinstance(doc.get("name"), str):
            return None
        shells = [tuple(s) for s in doc["shells"]]
        envs = [tuple(tuple(kv) for kv in e) for e in doc["envs"]]
        cwds = doc["cwds"]
        steps = []
        for sid, cmd, sh, needs, to, retries, bo, ji, gr, arts, ins, env, cwd, log, sha in doc["steps"]:
            step = Step(sid, cmd if cmd.__class__ is str else tuple(cmd), shells[sh], tuple(needs) if needs else _E,
                        to, retries, bo, ji, gr, tuple(arts) if arts else _E, tuple(ins) if ins else _E,
                        envs[env], cwds[cwd], log)
            fingerprint.remember_command_sha(step, sha)
            steps.append(step)
        reconcile = doc["reconcile"]
        problems = Problems(Locator(p, data.decode("utf-8")))
        return Declared(problems, doc["name"], Path(doc["base"]),
                        (reconcile[0], reconcile[1]) if reconcile else None, steps)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeDecodeError):
        return None
