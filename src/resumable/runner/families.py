"""Families of steps: a step table with ``params`` and/or ``files`` stands for one step per
combination of its parameters' values (an *instance*, ``family+value``; ``family+v1+v2`` for
several parameters, in the order they are declared: ``core.instance``).

- ``params = { shard = ["a", "b"], seed = { from = 1, to = 3, width = 2 } }``: a list, or a range
  (inclusive, ``step`` 1 by default, ``width`` pads with zeros); several parameters make their
  product (a matrix);
- ``files = "raw/{shard}.csv"``: one combination per existing file the pattern matches; each
  ``{name}`` matches a non-empty piece of one path part (no ``/``); relative to the step's ``cwd``;
- ``exclude = [{ seed = 2 }]`` drops the combinations matching every pair of a table;
  ``include = [{ shard = "c", seed = 9 }]`` adds one (it names every parameter), as CI matrices do.

This module reads those keys and makes the combinations (``Space``); ``runner.expand`` makes the
steps. The directories a ``files`` pattern listed are kept, with their stats at the time, for the
kept re-run answer (``runner.verdict``): a file added or removed there changes its directory's
mtime.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from resumable.core.instance import SEP
from resumable.core.instance import family_of as family_of
from resumable.runner.joblocate import Problems
from resumable.runner.templates import unknown_parameter

FAMILY_KEYS = frozenset({"params", "files", "exclude", "include"})
MAX_INSTANCES = 1_000_000  # per family: more is a typo in a range, not a job
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PART = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_GLOB = frozenset("*?[")


@dataclass(slots=True)
class Space:
    """A family's parameters and the combinations of their values, in order."""

    names: list[str]
    combos: list[tuple[str, ...]]
    # directory -> its stat when listed: what a files pattern's answer rests on
    scanned: list[tuple[str, os.stat_result]] = field(default_factory=list)
    declared: dict[str, set[str]] = field(default_factory=dict)  # the values of list and range parameters


def id_part(value: str) -> str:
    """A value as it shows in an instance id: characters outside ``[A-Za-z0-9._-]`` become ``_``
    (the command gets the value itself)."""
    return value if value.isascii() and value.isalnum() else _ID_UNSAFE.sub("_", value)


def instance_id(family: str, combo: Sequence[str]) -> str:
    """``family+v1+v2`` (``core.instance``)."""
    return SEP.join((family, *map(id_part, combo)))


def value_text(value: object) -> str | None:
    """A parameter value as text (a string, an integer or a number); None for anything else, and
    for a string holding NUL (no argument, path or variable can)."""
    if isinstance(value, str):
        return value if "\0" not in value else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return None


def read_space(table: str, raw: Mapping[str, Any], cwd: str, problems: Problems) -> Space | None:
    """The combinations the family's keys make; None (with problems added) when they make none."""
    n0 = len(problems.found) + problems.more
    names: list[str] = []
    files: list[tuple[str, ...]] | None = None
    scanned: list[tuple[str, os.stat_result]] = []
    if "files" in raw:
        got = _files(table, raw["files"], cwd, problems)
        if got is not None:
            file_names, files, scanned = got
            names.extend(file_names)
    lists: list[list[str]] = []
    declared: dict[str, set[str]] = {}
    if "params" in raw:
        for name, values in _params(table, raw["params"], problems):
            if name in names:
                problems.add(table, "params", f"parameter {name!r} is also a part of files")
                continue
            names.append(name)
            lists.append(values)
            declared[name] = set(values)
    if len(problems.found) + problems.more > n0:
        return None
    total = (len(files) if files is not None else 1)
    for values in lists:
        total *= len(values)
    if total > MAX_INSTANCES:
        problems.add(table, "params", f"makes {total:,} steps; the limit is {MAX_INSTANCES:,} per family")
        return None
    base: list[tuple[str, ...]] = files if files is not None else [()]
    combos: list[tuple[str, ...]] = [(*first, *rest) for first, *rest in product(base, *lists)]  # type: ignore[arg-type]
    space = Space(names, combos, scanned, declared)
    _exclude(table, raw.get("exclude"), space, problems)
    _include(table, raw.get("include"), space, problems)
    if not space.combos and len(problems.found) + problems.more == n0:
        problems.add(table, "exclude" if "exclude" in raw else "params",
                     "every combination is excluded: the family makes no step")
    return space if len(problems.found) + problems.more == n0 else None


def _params(table: str, value: object, problems: Problems) -> list[tuple[str, list[str]]]:
    if not isinstance(value, dict) or not value:
        problems.add(table, "params", 'expected a table of parameters, like { shard = ["a", "b"] }')
        return []
    out = []
    for name, spec in value.items():
        if not _NAME_RE.match(name) or name == "step":
            problems.add(table, "params", f"bad parameter name {name!r}: use letters, digits and '_' (not 'step')")
            continue
        values = _values(table, name, spec, problems)
        if values is not None:
            out.append((name, values))
    return out


def _values(table: str, name: str, spec: object, problems: Problems) -> list[str] | None:
    if isinstance(spec, list):
        texts = [value_text(v) for v in spec]
        if any(t is None or t == "" for t in texts):
            problems.add(table, "params", f"{name}: values must be non-empty strings or numbers")
            return None
        if not texts:
            problems.add(table, "params", f"{name}: an empty list makes no step")
            return None
        dup = _first_duplicate([id_part(t) for t in texts if t is not None])
        if dup is not None:
            problems.add(table, "params", f"{name}: two values make the same instance id part {dup!r}")
            return None
        return [t for t in texts if t is not None]
    if isinstance(spec, dict):
        return _range(table, name, spec, problems)
    problems.add(table, "params", f"{name}: expected a list of values or a range like {{ from = 1, to = 8 }}")
    return None


def _first_duplicate(values: Sequence[str]) -> str | None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)
    return None


def _range(table: str, name: str, spec: Mapping[str, Any], problems: Problems) -> list[str] | None:
    unknown = sorted(set(spec) - {"from", "to", "step", "width"})
    if unknown or "from" not in spec or "to" not in spec:
        problems.add(table, "params", f"{name}: a range is {{ from = 1, to = 8 }} (optional step, width)"
                     + (f"; unknown key {unknown[0]!r}" if unknown else ""))
        return None
    start, stop, step, width = spec["from"], spec["to"], spec.get("step", 1), spec.get("width", 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step, width)) \
            or step == 0 or width < 0:
        problems.add(table, "params", f"{name}: from, to, step and width are integers (step not 0, width >= 0)")
        return None
    count = max(0, (stop - start) // step + 1)
    if count == 0:
        problems.add(table, "params", f"{name}: the range from {start} to {stop} by {step} is empty: no step")
        return None
    if count > MAX_INSTANCES:
        problems.add(table, "params", f"{name}: {count:,} values; the limit is {MAX_INSTANCES:,} per family")
        return None
    fmt = f"{{:0{width}d}}" if width else "{}"
    return [fmt.format(v) for v in range(start, stop + (1 if step > 0 else -1), step)]


def _files(table: str, value: object, cwd: str, problems: Problems
           ) -> tuple[list[str], list[tuple[str, ...]], list[tuple[str, os.stat_result]]] | None:
    if not isinstance(value, str) or not value:
        problems.add(table, "files", 'expected a pattern like "raw/{shard}.csv"')
        return None
    names = list(dict.fromkeys(_PART.findall(value)))
    if not names:
        problems.add(table, "files", f"{value!r} has no {{name}} part: write one, like raw/{{shard}}.csv")
        return None
    bad = [n for n in names if n == "step"]
    if bad or not _GLOB.isdisjoint(value) or "{" in _PART.sub("", value) or "}" in _PART.sub("", value):
        problems.add(table, "files", f"{value!r}: use {{name}} parts only (no *, ?, [ or stray braces; "
                     "no part named 'step')")
        return None
    pattern = os.path.expanduser(value)
    root = pattern.startswith("/")
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    start = "/" if root else cwd
    scanned: list[tuple[str, os.stat_result]] = []
    found: list[tuple[str, dict[str, str]]] = []
    _walk(start, parts, {}, scanned, found)
    if not found:
        problems.add(table, "files", f"no file matches {value!r} (in {start}): the family makes no step")
        return None
    found.sort(key=lambda f: f[0])
    combos = [tuple(values[n] for n in names) for _, values in found]
    return names, combos, scanned


def _walk(top: str, parts: list[str], values: dict[str, str], scanned: list[tuple[str, os.stat_result]],
          found: list[tuple[str, dict[str, str]]]) -> None:
    """Every path under ``top`` that ``parts`` matches (the last part a regular file, the others
    directories; links to directories are not followed), with the values of its named parts."""
    if not parts:
        return
    head, rest = parts[0], parts[1:]
    if "{" not in head:
        path = os.path.join(top, head)
        if rest:
            if _is_dir(path):
                _walk(path, rest, values, scanned, found)
        elif _is_file(path):
            found.append((path, values))
        return
    regex = _part_regex(head)
    try:
        st = os.stat(top, follow_symlinks=False)
        with os.scandir(top) as entries:
            names = sorted(e.name for e in entries)
    except OSError:
        return
    scanned.append((top, st))
    for name in names:
        if name.startswith(".") and not head.startswith("."):
            continue  # hidden files, as a shell's glob leaves them
        m = regex.match(name)
        if m is None:
            continue
        got = dict(values)
        if any(got.setdefault(k, v) != v for k, v in m.groupdict().items()):
            continue  # a name used twice in the pattern matches the same value each time
        got.update(m.groupdict())
        path = os.path.join(top, name)
        if rest:
            if _is_dir(path):
                _walk(path, rest, got, scanned, found)
        elif _is_file(path):
            found.append((path, got))


def _part_regex(part: str) -> re.Pattern[str]:
    out = []
    pos = 0
    seen: set[str] = set()
    for m in _PART.finditer(part):
        out.append(re.escape(part[pos:m.start()]))
        name = m.group(1)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
        pos = m.end()
    out.append(re.escape(part[pos:]))
    return re.compile("^" + "".join(out) + "$", re.S)


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _pairs(table: str, key: str, value: object, space: Space, problems: Problems
           ) -> list[dict[str, set[str]]] | None:
    """An exclude or include list as [{parameter: {values}}]; None (problems added) when bad."""
    if not isinstance(value, list) or not all(isinstance(t, dict) and t for t in value):
        problems.add(table, key, f"expected a list of tables, like {key} = [{{ {space.names[0]} = ... }}]")
        return None
    out = []
    for t in value:
        row: dict[str, set[str]] = {}
        for name, v in t.items():
            if name not in space.names:
                problems.add(table, key, unknown_parameter(name, space.names, braces=False))
                return None
            texts = [value_text(x) for x in (v if isinstance(v, list) else [v])]
            if not texts or any(x is None for x in texts):
                problems.add(table, key, f"{name}: expected a value (a string or a number) or a list of them")
                return None
            known = space.declared.get(name)
            missing = [x for x in texts if known is not None and x not in known]
            if missing and key == "exclude":
                problems.add(table, key, f"{name} = {missing[0]!r} is not one of its values"
                             f" ({', '.join(sorted(known or ()))[:200]})")
                return None
            row[name] = {x for x in texts if x is not None}
        out.append(row)
    return out


def _exclude(table: str, value: object, space: Space, problems: Problems) -> None:
    if value is None:
        return
    rows = _pairs(table, "exclude", value, space, problems)
    if not rows:
        return
    index = {n: i for i, n in enumerate(space.names)}
    space.combos = [c for c in space.combos
                    if not any(all(c[index[n]] in vs for n, vs in row.items()) for row in rows)]


def _include(table: str, value: object, space: Space, problems: Problems) -> None:
    if value is None:
        return
    rows = _pairs(table, "include", value, space, problems)
    if not rows:
        return
    have = set(space.combos)
    for row in rows:
        missing = [n for n in space.names if n not in row]
        if missing or any(len(vs) != 1 for vs in row.values()):
            problems.add(table, "include", f"an include names one value of every parameter ({', '.join(space.names)})"
                         + (f"; missing {missing[0]!r}" if missing else ""))
            return
        combo = tuple(next(iter(row[n])) for n in space.names)
        if "" in combo:
            problems.add(table, "include", "values must be non-empty")
            return
        if combo not in have:
            have.add(combo)
            space.combos.append(combo)
