"""A step's declared inputs as the files they name: a path, a glob, or a directory.

- a path names one file (or a directory: see below);
- a glob (``*``, ``?``, ``[...]``; ``**`` crosses directories) names its matches, sorted, so a
  match that appears or disappears changes what the step depends on;
- a directory names every file under it, walked, sorted (a link to a directory is not followed).

A file is named as the step would write it: a path as written, a glob's match and a directory's
files relative to the step's directory (``data/a.csv``), which is how reasons speak of them
(``input changed: data/a.csv``). Expansion stats every file once; the stats go to the fingerprint
(``runner.fingerprint``), which re-hashes only a file whose size, mtime or inode changed.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from collections.abc import Mapping, Sequence
from typing import NamedTuple

_MAGIC = frozenset("*?[")


class InputFile(NamedTuple):  # a tuple: every step of a big job has some, built on every load
    name: str  # as the step names it (see the module's docstring)
    path: str  # absolute
    st: os.stat_result


# NamedTuple's own constructor is a Python-level call (0.8 us); tuple.__new__ builds the same
# object in a fifth of that, on the path every input of every step takes on every run.
_new = tuple.__new__


def is_glob(pattern: str) -> bool:
    return not _MAGIC.isdisjoint(pattern)


def resolve(cwd: str, pattern: str) -> str:
    if pattern[0] not in "/~." and "/." not in pattern and "//" not in pattern and pattern[-1] != "/":
        return f"{cwd}/{pattern}"  # already normal (cwd is): the path of nearly every input, cheaply
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(pattern)))


def expand(cwd: str, patterns: Sequence[str], outputs: Sequence[str] = ()) -> tuple[list[InputFile], list[str]]:
    """(the files the patterns name, in order and each once; the patterns that name nothing).
    ``outputs``: the step's own artifacts (as declared), never among its inputs, though a glob or
    a directory covers them: what a step makes is not what it depends on."""
    if len(patterns) == 1 and not outputs and _MAGIC.isdisjoint(patterns[0]):
        # One path: what nearly every step of a big job has, checked on every run, so kept short.
        found = _path(cwd, patterns[0])
        return found, [] if found else list(patterns)
    files: list[InputFile] = []
    missing: list[str] = []
    seen: set[str] = {resolve(cwd, o) for o in outputs}
    for pattern in patterns:
        found = _glob(cwd, pattern) if is_glob(pattern) else _path(cwd, pattern)
        if not found:
            missing.append(pattern)
        elif all(f.path in seen for f in found) and not is_glob(pattern) and found[0].name == pattern:
            missing.append(pattern)  # a path naming the step's own artifact: not an input
        for f in found:
            if f.path not in seen:
                seen.add(f.path)
                files.append(f)
    return files, missing


def _path(cwd: str, pattern: str) -> list[InputFile]:
    path = resolve(cwd, pattern)
    try:
        st = os.stat(path)
    except OSError:
        return []
    if st.st_mode & 0o170000 == stat.S_IFDIR:  # stat.S_ISDIR, without a call per input
        return _walk(path, pattern)
    return [_new(InputFile, (pattern, path, st))]


def _glob(cwd: str, pattern: str) -> list[InputFile]:
    pattern = os.path.expanduser(pattern)
    out: list[InputFile] = []
    for match in sorted(glob.glob(pattern, root_dir=cwd, recursive=True)):
        path = os.path.normpath(os.path.join(cwd, match))
        try:
            st = os.stat(path)
        except OSError:
            continue  # a dangling link, or gone since the listing
        if stat.S_ISDIR(st.st_mode):
            out.extend(_walk(path, match))
        else:
            out.append(InputFile(os.path.normpath(match), path, st))
    return out


def _walk(top: str, shown: str) -> list[InputFile]:
    out: list[InputFile] = []
    for root, dirs, names in os.walk(top):
        dirs.sort()
        rel = os.path.relpath(root, top)
        for name in sorted(names):
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(InputFile(os.path.normpath(os.path.join(shown, rel, name)), path, st))
    out.sort(key=lambda f: f.name)
    return out


def producers(cwd: str, pattern: str, artifacts: Mapping[str, str]) -> list[str]:
    """The steps whose declared artifacts (absolute path -> step) the pattern names: the producers
    an input implicitly needs. A glob's ``*`` stays within one directory, as the shell's does."""
    path = resolve(cwd, pattern)
    if not is_glob(pattern):
        if path in artifacts:
            return [artifacts[path]]
        inside = path.rstrip("/") + "/"
        return sorted({sid for p, sid in artifacts.items() if p.startswith(inside)})
    parts = path.split("/")
    deep = "**" in parts
    out: set[str] = set()
    for p, sid in artifacts.items():
        if deep:
            if fnmatch.fnmatchcase(p, path.replace("**/", "*").replace("**", "*")):
                out.add(sid)
            continue
        names = p.split("/")
        if len(names) >= len(parts) and all(map(fnmatch.fnmatchcase, names, parts)):
            out.add(sid)  # a match, or a file under a matched directory
    return sorted(out)
