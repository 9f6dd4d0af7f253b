"""What a step's result depends on, and whether its outputs are still what it produced.

A fingerprint has separate parts (command, env, cwd, each input file's content) so that a re-run can
say *which* one changed. Files are compared by content (SHA-256), but each record also keeps the
file's size, mtime_ns and inode when it was hashed: a file whose three are unchanged is not read
again (rehashing a multi-gigabyte input on every resume is checkpoint-run's weakness). The records
are stored with the run, on each unit, so this holds across runs and processes.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resumable.core import jsonio
from resumable.runner import inputs
from resumable.runner.jobfile import Step

if TYPE_CHECKING:
    from resumable.core.types import FileRecord, Fingerprint

FINGERPRINT_VERSION = 1
_CHUNK = 1 << 20


# The bytes hashed are the compact JSON of a list of strings (or of [name, value] pairs), as
# json.dumps(value, separators=(",", ":"), ensure_ascii=False) writes it: jsonio.canonical's text,
# which is the same for lists (no keys to sort), so stored hashes hold.
_ENV_SHAS: dict[tuple[tuple[str, str], ...], str] = {}  # most steps share their job's environment


def _sha(value: list[Any]) -> str:
    return hashlib.sha256(jsonio.canonical(value)).hexdigest()


def _argv_sha(argv: list[str]) -> str:
    return _sha(argv)


# Command hashes by what makes a step's argv (its command, and its shell for a string): every
# re-run asks one per step, and a job's steps share few shells.
_COMMAND_SHAS: dict[object, str] = {}


def command_sha(step: Step) -> str:
    """``_argv_sha(step.argv)``, remembered."""
    command = step.command
    key: object = (step.shell, command) if command.__class__ is str else command
    sha = _COMMAND_SHAS.get(key)
    if sha is None:
        sha = _COMMAND_SHAS[key] = _argv_sha(step.argv)
    return sha


def remember_command_sha(step: Step, sha: str) -> None:
    """What ``command_sha(step)`` is, known from a cache that computed it (``runner.jobcache``)."""
    command = step.command
    _COMMAND_SHAS[(step.shell, command) if command.__class__ is str else command] = sha


def done_and_current(steps: Sequence[Step], units: Mapping[str, Any]) -> list[bool]:
    """For each step, whether its unit is done with the fingerprint the step has now, for a step
    with no inputs and no artifacts: the answer for nearly every step of a re-run of a large job,
    from a few comparisons of stored strings in one loop (no fingerprint built, no file looked
    at, no call per step). False is no verdict: the caller decides the long way."""
    version, memo = FINGERPRINT_VERSION, _COMMAND_SHAS
    envs: dict[int, tuple[tuple[tuple[str, str], ...], str]] = {}  # by identity: steps share their job's
    out: list[bool] = []
    for step in steps:
        unit = units.get(step.id)
        ok = False
        if unit.__class__ is dict and not step.inputs and not step.artifacts and unit.get("status") == "done":
            stored = unit.get("fingerprint")
            if stored.__class__ is dict and stored.get("v") == version and stored.get("cwd") == step.cwd \
                    and not stored.get("inputs"):
                command = step.command
                sha = memo.get((step.shell, command) if command.__class__ is str else command)
                env = step.env
                known = envs.get(id(env))
                if known is None or known[0] is not env:
                    known = envs[id(env)] = (env, _env_sha(env))
                ok = stored.get("command") == (sha or command_sha(step)) and stored.get("env") == known[1]
        out.append(ok)
    return out


def _env_sha(env: tuple[tuple[str, str], ...]) -> str:
    sha = _ENV_SHAS.get(env)
    if sha is None:
        sha = _ENV_SHAS[env] = _sha(list(env))
    return sha


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# Hashes taken by this process, by (device, inode, size, mtime_ns): one file that is the input of
# many steps (or hard-linked under many names) is read once per run, not once per step.
_HASHED: dict[tuple[int, int, int, int], str] = {}
_RACY_NS = 2_000_000_000


def _hash(path: str, st: os.stat_result) -> str:
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    digest = _HASHED.get(key)
    if digest is None:
        digest = sha256_file(path)
        # A file modified in the last moments may be written again within the file system's
        # timestamp granularity, same size, same inode: such a hash is not remembered.
        if time.time_ns() - st.st_mtime_ns > _RACY_NS:
            _HASHED[key] = digest
    return digest


def resolve(step: Step, path: str) -> str:
    return inputs.resolve(step.cwd, path)


def same_stat(record: object, st: os.stat_result) -> bool:
    """Whether a stored record was taken of this very file version: same size, mtime_ns and inode
    (a record written before inodes were recorded is matched on size and mtime)."""
    if record.__class__ is str:
        return record.endswith(f" {st.st_size} {st.st_mtime_ns} {st.st_ino}")
    return (isinstance(record, dict) and record.get("size") == st.st_size
            and record.get("mtimeNs") == st.st_mtime_ns and record.get("ino", st.st_ino) == st.st_ino
            and isinstance(record.get("sha256"), str))


def record_sha(record: object) -> str | None:
    """The content hash of a file record: an input's ``"<sha256> <size> <mtime_ns> <inode>"``, or
    an artifact's (and an older input's) ``{"sha256": ..., ...}``; None for a missing file."""
    if record.__class__ is str:
        return record[:_SHA_LEN]
    sha = record.get("sha256") if isinstance(record, dict) else None
    return sha if isinstance(sha, str) else None


_SHA_LEN = 64


def file_record(path: str, previous: Mapping[str, Any] | None = None,
                st: os.stat_result | None = None) -> FileRecord | None:
    """``{"size", "mtimeNs", "ino", "sha256"}`` of a file, or None when it is missing. The hash of
    ``previous`` is reused when it was taken of the same file version (``same_stat``): make's
    speed, with a content hash's correctness."""
    try:
        if st is None:
            st = os.stat(path)
        digest = previous["sha256"] if previous is not None and same_stat(previous, st) else _hash(path, st)
    except OSError:
        return None
    return {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "ino": st.st_ino, "sha256": digest}


def input_record(path: str, st: os.stat_result, previous: object) -> str | None:
    """An input file's record, one string (a big job has one per step, parsed on every run):
    ``"<sha256> <size> <mtime_ns> <inode>"``; the hash of ``previous`` is reused when it was taken
    of the same file version; None when the file cannot be read."""
    if same_stat(previous, st):
        digest = record_sha(previous)
    else:
        try:
            digest = _hash(path, st)
        except OSError:
            return None
    return f"{digest} {st.st_size} {st.st_mtime_ns} {st.st_ino}"


def input_records(step: Step, previous: Mapping[str, Any] | None = None,
                  files: Sequence[inputs.InputFile] | None = None) -> dict[str, str | None]:
    """``{name: record}`` of every file the step's inputs name now (``files``: as expanded a moment
    ago); a path no file answers (an artifact another step has not made yet) maps to None."""
    if files is None:
        files, missing = inputs.expand(step.cwd, step.inputs, step.artifacts)
    else:
        missing = []
    out: dict[str, str | None] = {}
    prev = previous or {}
    for f in files:
        out[f.name] = input_record(f.path, f.st, prev.get(f.name))
    for pattern in missing:
        if not inputs.is_glob(pattern):
            out[pattern] = None
    return out


def fingerprint(step: Step, previous: Mapping[str, Any] | None = None,
                files: Sequence[inputs.InputFile] | None = None) -> Fingerprint:
    """The step's fingerprint as stored on its unit (``fingerprint`` field)."""
    out: Fingerprint = {
        "v": FINGERPRINT_VERSION,
        # argv rather than the text: the same text under another shell is another command.
        "command": command_sha(step),
        "env": _env_sha(step.env),
        "cwd": step.cwd,
    }
    if step.inputs:  # absent means none (the check below reads it so): one dict less per unit
        prev_inputs = previous.get("inputs") if isinstance(previous, dict) else None
        out["inputs"] = input_records(step, prev_inputs if isinstance(prev_inputs, dict) else None, files)
    return out


def unchanged(step: Step, stored: object, files: Sequence[inputs.InputFile] | None = None) -> bool:
    """Whether the stored fingerprint still holds, without hashing anything: command, env and cwd
    are the same, and every input names the same files, each of the same size, mtime and inode.
    False may still be a fingerprint that holds (a file touched, same content): the caller asks
    ``fingerprint_changes``. What every re-run asks of every step: kept to a few lookups."""
    if not (isinstance(stored, dict) and stored.get("v") == FINGERPRINT_VERSION
            and stored.get("cwd") == step.cwd and stored.get("command") == command_sha(step)
            and stored.get("env") == _env_sha(step.env)):
        return False
    old = stored.get("inputs")
    if not step.inputs:
        return not old
    if not isinstance(old, dict):
        return False
    if files is None:
        files, missing = inputs.expand(step.cwd, step.inputs, step.artifacts)
        if missing:
            return False
    if len(files) != len(old):
        return False
    for f in files:  # noqa: SIM110 (a loop, not all() of a generator: most steps have one input)
        if not same_stat(old.get(f.name), f.st):
            return False
    return True


def fingerprint_changes(step: Step, stored: object,
                        files: Sequence[inputs.InputFile] | None = None) -> list[str]:
    """Reasons the stored fingerprint no longer matches, most telling first; [] when unchanged."""
    return changes_between(stored, fingerprint(step, stored if isinstance(stored, dict) else None, files))


def changes_between(stored: object, now: Mapping[str, Any]) -> list[str]:
    """Reasons fingerprint ``now`` differs from ``stored``; [] when it does not."""
    if not isinstance(stored, dict) or stored.get("v") != FINGERPRINT_VERSION:
        return ["fingerprint not recorded"]
    reasons = [f"{part} changed" for part in ("command", "env", "cwd") if now[part] != stored.get(part)]
    old_inputs = stored.get("inputs")
    if not isinstance(old_inputs, dict):
        old_inputs = {}
    new_inputs = now.get("inputs", {})
    for p, rec in new_inputs.items():
        if p not in old_inputs:
            reasons.append(f"input added: {p}")
        elif record_sha(rec) != record_sha(old_inputs[p]):
            reasons.append(f"input {'missing' if rec is None else 'changed'}: {p}")
    for p in old_inputs:
        if p not in new_inputs:
            reasons.append(f"input removed: {p}")
    return reasons


@dataclass(frozen=True)
class ArtifactCheck:
    ok: bool
    reason: str  # "" when ok


def artifact_records(step: Step) -> dict[str, FileRecord | None]:
    """Records of every declared artifact after a successful exit; missing ones map to None."""
    return {p: file_record(resolve(step, p)) for p in step.artifacts}


def check_artifacts(step: Step, stored: object) -> ArtifactCheck:
    """Every declared artifact exists with the content recorded when the step finished."""
    if not step.artifacts:
        return _OK
    recs = stored if isinstance(stored, dict) else {}
    for p in step.artifacts:
        path = resolve(step, p)
        old = recs.get(p)
        if not os.path.exists(path):
            return ArtifactCheck(False, f"artifact missing: {p}")
        if not isinstance(old, Mapping) or not isinstance(old.get("sha256"), str):
            return ArtifactCheck(False, f"artifact not recorded: {p}")
        try:
            st = os.stat(path)
        except OSError:
            return ArtifactCheck(False, f"artifact missing: {p}")
        if same_stat(old, st):
            continue
        try:
            same = _hash(path, st) == old["sha256"]
        except OSError:
            same = False
        if not same:
            return ArtifactCheck(False, f"artifact changed: {p}")
    return _OK


_OK = ArtifactCheck(True, "")
