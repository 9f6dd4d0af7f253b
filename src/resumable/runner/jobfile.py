"""Job descriptions: a TOML job file -> a :class:`Job` (checkpoint-run's ``--step`` flags: ``jobflags``).

Everything here is validated up front: a job that reaches the scheduler has known ids, known
``needs``, no cycles and well-typed values, so a typo never surfaces halfway through a long run.
Every problem of a job file is reported in one pass (up to a limit), each with the file, the line
(found by scanning the text, only when there is an error: TOML parsers keep no positions) and the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from pathlib import Path
from typing import Any

from resumable.core import durations
from resumable.core.instance import is_instance
from resumable.core.plan import find_cycles
from resumable.errors import InvalidInputError, UsageError
from resumable.runner import jobpython
from resumable.runner.expand import Family, expand
from resumable.runner.families import FAMILY_KEYS
from resumable.runner.inputs import InputFile
from resumable.runner.jobgraph import acyclic, resolve_inputs
from resumable.runner.joblocate import Locator, Problems
from resumable.runner.joblocate import did_you_mean as did_you_mean
from resumable.runner.jobmodel import DEFAULT_BACKOFF as DEFAULT_BACKOFF
from resumable.runner.jobmodel import DEFAULT_GRACE as DEFAULT_GRACE
from resumable.runner.jobmodel import DEFAULT_JITTER as DEFAULT_JITTER
from resumable.runner.jobmodel import DEFAULT_JOB_FILE as DEFAULT_JOB_FILE
from resumable.runner.jobmodel import DEFAULT_SHELL as DEFAULT_SHELL
from resumable.runner.jobmodel import Job as Job
from resumable.runner.jobmodel import Step as Step
from resumable.runner.jobpython import is_python
from resumable.runner.jobtoml import parse_toml

# Step ids become log file names and unit ids: keep them to a portable, traversal-free alphabet.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_JOB_KEYS = frozenset({"name", "timeout", "retries", "backoff", "jitter", "env", "cwd", "shell", "grace",
                       "reconcile"})
_STEP_KEYS = frozenset({"run", "needs", "timeout", "retries", "artifacts", "inputs", "env", "cwd", "log",
                        "backoff", "jitter", "grace", "shell"})


class _Bad(ValueError):
    """A value's problem, without its location (added by the caller, only when there is one)."""


def _duration(value: object) -> float:
    try:
        return durations.seconds(value)
    except durations.DurationError as exc:
        raise _Bad(str(exc)) from None


def parse_duration(value: object, where: str, *, minimum: float = 0.0) -> float:
    """``90``, ``1.5``, ``"90s"``, ``"10m"``, ``"2h"``, ``"250ms"`` -> seconds, bounded
    (``core.durations``: the one parser of every duration option and job-file key)."""
    try:
        return durations.seconds(value, minimum=minimum)
    except durations.DurationError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None


def _id_problem(value: str, what: str) -> str | None:
    if _ID_RE.match(value) and (what == "step id" or ".." not in value):
        return None
    extra = "" if what == "step id" else ", without '..'"
    return (f"bad {what} {value!r}; use letters, digits, '.', '_' and '-' (starting with a letter or "
            f"digit{extra})")


def check_step_id(step_id: str, where: str) -> str:
    problem = _id_problem(step_id, "step id")
    if problem:
        raise InvalidInputError(f"{where}: {problem}")
    return step_id


def check_job_name(name: str, where: str) -> str:
    """A job name is its run id: a step id's alphabet, and no '..'."""
    problem = _id_problem(name, "job name")
    if problem:
        raise InvalidInputError(f"{where}: {problem}")
    return name


def default_job_name(path: Path) -> str:
    """The job file's stem, or for ``resumable.toml`` its directory's name (as make's project is
    its directory)."""
    if path.name == DEFAULT_JOB_FILE:
        return path.resolve().parent.name
    return path.stem


# --------------------------------------------------------------------------- TOML job file


def _str_list(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    # map(), not a generator: every input list of a big job passes here
    if not isinstance(value, list) or not all(map(isinstance, value, repeat(str))) or not all(value):
        raise _Bad("expected a list of non-empty strings")
    return tuple(value)


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _Bad("expected a table of NAME = \"value\"")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not _ENV_NAME_RE.match(k):
            raise _Bad(f"bad environment variable name {k!r}")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise _Bad(f"{k} must be a string or a number")
        out[k] = str(v)
    return out


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"expected an integer >= 0, got {value!r}")
    return value


def _fraction(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise _Bad(f"expected a number between 0 and 1, got {value!r}")
    return float(value)


def _shell(value: object) -> tuple[str, ...]:
    # A bare program name gets "-c"; a list is the full prefix (e.g. ["bash", "-euo", "pipefail", "-c"]).
    if isinstance(value, str) and value:
        return (value, "-c")
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise _Bad("expected a shell program or a list like [\"bash\", \"-c\"]")


def _command(value: object) -> str | tuple[str, ...]:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and all(map(isinstance, value, repeat(str))):
        return tuple(value)
    raise _Bad("expected a command string or a non-empty list of strings")


def _log(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _Bad("expected a file path")
    return value


def _reconcile(value: object) -> tuple[str, str]:
    if not isinstance(value, dict):
        raise _Bad('expected a table like { ref = "main", repo = "." }')
    unknown = sorted(set(value) - {"ref", "repo"})
    if unknown:
        raise _Bad(f"unknown key {unknown[0]!r}; known: ref, repo")
    ref = value.get("ref", "HEAD")
    repo = value.get("repo", ".")
    if not isinstance(ref, str) or not ref.strip() or not isinstance(repo, str) or not repo:
        raise _Bad("ref and repo must be non-empty strings")
    return ref, os.path.expanduser(repo)


def _dir(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _Bad("expected a directory path")
    return os.path.expanduser(value)


# step key -> (Step field, converter)
_STEP_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "run": ("command", _command), "needs": ("needs", _str_list), "timeout": ("timeout", _duration),
    "retries": ("retries", _int), "artifacts": ("artifacts", _str_list), "inputs": ("inputs", _str_list),
    "env": ("env", _env), "cwd": ("cwd", _dir), "log": ("log", _log), "backoff": ("backoff", _duration),
    "jitter": ("jitter", _fraction), "grace": ("grace", _duration), "shell": ("shell", _shell),
}
assert set(_STEP_FIELDS) == _STEP_KEYS


def load_job_file(path: str | os.PathLike[str], name_override: str | None = None) -> Job:
    """The job of a TOML job file, or of a Python file that builds one (``runner.jobpython``)."""
    p = Path(path)
    if is_python(p):
        return parse_job(read_job_bytes(p), p, name_override)[0]
    text = job_text(p, read_job_bytes(p))
    return job_from_mapping(parse_toml(text, p), p, text, name_override)


def read_job_bytes(p: Path) -> bytes:
    """The job file's bytes; for a Python file, what its job is keyed by (its bytes and the job
    it builds: the file is run, once per invocation)."""
    from resumable import fsio

    if is_python(p):
        return jobpython.build(p).key

    try:
        # Never blocks on a FIFO, never reads a device: a regular file only (a link may lead to it).
        return fsio.read_bytes(str(p), follow=True)
    except FileNotFoundError:
        raise UsageError(
            f"no job file {str(p)!r}; write one (the format is in the runner's guide, docs/runner.md) or pass"
            " --step ID:COMMAND"
        ) from None
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read job file: {exc}") from exc


def job_text(p: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{p}: cannot read job file: {exc}") from exc


def parse_job(data: bytes, p: Path, name_override: str | None) -> tuple[Job, Declared]:
    """The job a file's bytes describe, and what it declares before its inputs are looked up
    (``runner.jobcache`` keeps that: the inputs' files are the file system's, looked up each time)."""
    if is_python(p):
        built = jobpython.build(p)
        declared = declared_steps(built.document, p, "", name_override, built.sites)
        for sid, line in built.twice:
            declared.problems.add(f"steps.{sid}", None, f"a second step {sid!r} (at line {line}); step ids are unique")
        declared.cacheable = False  # the file runs every time: nothing to save by keeping its parse
        return finish_job(declared, p), declared
    text = job_text(p, data)
    declared = declared_steps(parse_toml(text, p), p, text, name_override)
    return finish_job(declared, p), declared


class _Reader:
    """Typed values of one table, defaults where absent; a bad value is a problem, not a stop."""

    __slots__ = ("problems", "raw", "table")

    def __init__(self, problems: Problems, table: str, raw: Mapping[str, Any]) -> None:
        self.problems = problems
        self.table = table
        self.raw = raw

    def get(self, key: str, convert: Callable[[Any], Any], default: Any) -> Any:
        raw = self.raw
        if key not in raw:
            return default
        try:
            return convert(raw[key])
        except _Bad as exc:
            self.problems.add(self.table, key, str(exc))
            return default

    def unknown(self, known: frozenset[str], what: str) -> None:
        for key in self.raw:
            if key not in known:
                self.problems.add(self.table, key, f"unknown {what} {key!r}{did_you_mean(key, known)}; known: "
                                  f"{', '.join(sorted(known))}")


@dataclass
class Declared:
    """A job file's steps as declared (defaults applied, needs checked), before its inputs are
    expanded on the file system; ``problems`` so far."""

    problems: Problems
    name: str | None
    base: Path
    reconcile: tuple[str, str] | None
    steps: list[Step]
    # Families of steps (``runner.expand``), made into steps by ``finish_job``: a ``files``
    # pattern is matched against the files there are then, every time.
    families: list[Family] = field(default_factory=list)
    cacheable: bool = True  # whether ``runner.jobcache`` may keep it (a job read the same every time)

    def __post_init__(self) -> None:
        if self.families:
            self.cacheable = False


def job_from_mapping(
    data: Mapping[str, Any], path: Path, text: str = "", name_override: str | None = None
) -> Job:
    """A validated job; every problem of the file is reported at once (``JobFileError``)."""
    return finish_job(declared_steps(data, path, text, name_override), path)


def declared_steps(data: Mapping[str, Any], path: Path, text: str, name_override: str | None,
                   locator: Locator | None = None) -> Declared:
    """The steps a job document declares (a TOML job file's, or a Python job's: ``locator`` then
    finds the lines of its calls)."""
    problems = Problems(locator or Locator(path, text))
    base = path.resolve().parent
    for key in data:
        if key not in ("job", "steps"):
            problems.add(key, None, f"unknown table {key!r}; expected [job] and [steps.<id>]")
    job = data.get("job", {})
    if not isinstance(job, dict):
        problems.add("job", None, "[job] must be a table")
        job = {}
    jr = _Reader(problems, "job", job)
    jr.unknown(_JOB_KEYS, "key")
    name = _job_name(job, path, name_override, problems)
    defaults = _step_defaults(jr, base)
    reconcile = jr.get("reconcile", _reconcile, None)
    if reconcile is not None:
        reconcile = (reconcile[0], os.path.normpath(os.path.join(base, reconcile[1])))
    steps_data = data.get("steps")
    if not isinstance(steps_data, dict) or not steps_data:
        problems.add(None, None, "no steps; add at least one [steps.<id>] table with run = ...")
        steps_data = {}
    steps, families = _read_steps(steps_data, defaults, problems)
    graph = {s.id: s.needs for s in steps}
    if families:
        graph.update({f.name: () for f in families})
    _check_needs(graph, problems, families)
    return Declared(problems, name, base, reconcile, steps, families)


def finish_job(declared: Declared, path: Path) -> Job:
    """The job, its inputs expanded and its graph checked for cycles; JobFileError for every problem."""
    problems, name, base, reconcile, steps = (declared.problems, declared.name, declared.base,
                                              declared.reconcile, declared.steps)
    scanned: Sequence[tuple[str, os.stat_result]] = ()
    if declared.families:
        steps, scanned = expand(steps, declared.families, problems)
    graph = {s.id: s.needs for s in steps}
    input_files: dict[str, Sequence[InputFile]] = {}
    if any(s.inputs for s in steps):
        steps, input_files = resolve_inputs(steps, problems)
        graph = {s.id: s.needs for s in steps}
    if not problems and not acyclic(graph):
        for cycle in find_cycles(graph):
            problems.add(f"steps.{cycle[0]}", "needs", f"dependency cycle: {' -> '.join([*cycle, cycle[0]])}")
    problems.check()
    assert name is not None
    return Job(name=name, steps=tuple(steps), source=str(path), base_dir=str(base), reconcile=reconcile,
               input_files=input_files, scanned=scanned)


def _step_defaults(jr: _Reader, base: Path) -> dict[str, object]:
    """Every step field as the [job] table sets it (or the built-in default)."""
    d_env = jr.get("env", _env, {})
    return {
        "command": "", "shell": jr.get("shell", _shell, DEFAULT_SHELL), "needs": (),
        "timeout": jr.get("timeout", _duration, None), "retries": jr.get("retries", _int, 0),
        "backoff": jr.get("backoff", _duration, DEFAULT_BACKOFF), "jitter": jr.get("jitter", _fraction, DEFAULT_JITTER),
        "grace": jr.get("grace", _duration, DEFAULT_GRACE), "artifacts": (), "inputs": (),
        "env": tuple(sorted(d_env.items())), "cwd": os.path.normpath(os.path.join(base, jr.get("cwd", _dir, "."))),
        "log": None,
    }


def _read_steps(steps_data: Mapping[str, Any], defaults: Mapping[str, Any], problems: Problems
                ) -> tuple[list[Step], list[Family]]:
    """The ordinary steps, and the families (``runner.expand``): tables with ``params`` or
    ``files``, and steps whose needs or fields name a family or another step's artifacts."""
    steps: list[Step] = []
    families: list[Family] = []
    d = defaults
    simple = (d["shell"], (), d["timeout"], d["retries"], d["backoff"], d["jitter"], d["grace"], ())
    env_items, cwd = d["env"], d["cwd"]
    # Each parsed string is its own object: the program most steps share ("touch", "python") would
    # be held once per step for the whole run. One object for each distinct argument.
    seen: dict[str, str] = {}
    for sid, raw in steps_data.items():
        table = f"steps.{sid}"
        bad_id = _id_problem(sid, "step id")
        if bad_id:
            problems.add(table, None, bad_id)
        if not isinstance(raw, dict):
            problems.add(table, None, "must be a table")
            continue
        n = len(raw)
        if (n == 1 or (n == 2 and "inputs" in raw)) and "run" in raw:
            # The commonest steps by far, and what a 100,000-step file is made of (fields in
            # declaration order: positional arguments are the cheapest to pass).
            key = "run"
            try:
                command = _command(raw["run"])
                if command.__class__ is tuple:
                    command = tuple([seen.setdefault(a, a) for a in command])
                key = "inputs"
                ins = _str_list(raw["inputs"]) if n == 2 else ()
            except _Bad as exc:
                problems.add(table, key, str(exc))
                continue
            if (("{" in command if command.__class__ is str else "{" in "\0".join(command)) \
                    or (ins and "{" in "\0".join(ins))) and names_artifacts(raw):
                families.append(_family(sid, raw, defaults, problems, len(steps), parametric=False))
                continue
            steps.append(Step(sid, command, *simple, ins, env_items, cwd))
            continue
        if "params" in raw or "files" in raw:
            families.append(_family(sid, raw, defaults, problems, len(steps), parametric=True))
        elif any(isinstance(n, dict) for n in _as_list(raw.get("needs"))) or names_artifacts(raw):
            families.append(_family(sid, raw, defaults, problems, len(steps), parametric=False))
        else:
            steps.append(_read_step(sid, raw, defaults, problems))
    if families:
        steps = _needing_families(steps, families, problems)
    return steps, families


def _as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value] if value is not None else []


def names_artifacts(raw: Mapping[str, Any]) -> bool:
    """Whether a step table names another step's artifacts (``{step.artifacts}``) where it may."""
    texts = [*_as_list(raw.get("run")), *_as_list(raw.get("inputs"))]
    env = raw.get("env")
    if isinstance(env, dict):
        texts.extend(env.values())
    return any(isinstance(t, str) and ".artifacts}" in t for t in texts)


def _family(sid: str, raw: Mapping[str, Any], defaults: Mapping[str, Any], problems: Problems, position: int,
            *, parametric: bool) -> Family:
    """A family's table: its fields read as a step's (templates and all), its own keys and needs
    kept for the expansion."""
    keep = () if parametric else ("exclude", "include")  # told by _read_step
    fields = {k: v for k, v in raw.items() if (k not in FAMILY_KEYS or k in keep) and k != "needs"}
    step = _read_step(sid, fields, defaults, problems)
    return Family(sid, step, raw, position, parametric)


def _needing_families(steps: list[Step], families: list[Family], problems: Problems) -> list[Step]:
    """Ordinary steps that need a family become families of one (their needs name instances once
    the families are made), keeping the order the job declares them in."""
    names = {f.name for f in families}
    if not any(n in names for s in steps for n in s.needs):
        return steps
    kept: list[Step] = []
    moved: list[Family] = []
    shift = [0] * (len(steps) + 1)
    for i, s in enumerate(steps):
        if any(n in names for n in s.needs):
            raw = {"needs": list(s.needs)}
            moved.append(Family(s.id, replace(s, needs=()), raw, len(kept), False))
            shift[i + 1] = shift[i] + 1
        else:
            kept.append(s)
            shift[i + 1] = shift[i]
    for f in families:
        f.position -= shift[f.position]
    families.extend(moved)
    families.sort(key=lambda f: f.position)  # stable: a step moved keeps its place among families
    return kept


def _read_step(sid: str, raw: Mapping[str, Any], defaults: Mapping[str, Any], problems: Problems) -> Step:
    table = f"steps.{sid}"
    if "run" not in raw:
        problems.add(table, None, "missing run = \"command\" (or a list for argv)")
    # One pass over the keys the step has (most have one or two): a 100,000-step file must not
    # pay for every key it does not use.
    values = dict(defaults)
    for key, value in raw.items():
        spec = _STEP_FIELDS.get(key)
        if spec is None and key in FAMILY_KEYS:
            problems.add(table, key, f"{key} goes with params or files (a family of steps)")
            continue
        if spec is None:
            known = _STEP_KEYS | FAMILY_KEYS
            problems.add(table, key, f"unknown key {key!r}{did_you_mean(key, known)}; known: "
                         f"{', '.join(sorted(known))}")
            continue
        try:
            values[spec[0]] = spec[1](value)
        except _Bad as exc:
            problems.add(table, key, str(exc))
    if "env" in raw:
        env = dict(defaults["env"])
        env.update(values["env"] if isinstance(values["env"], dict) else {})
        values["env"] = tuple(sorted(env.items()))
    if "cwd" in raw:
        values["cwd"] = os.path.normpath(os.path.join(defaults["cwd"], values["cwd"]))
    if values["log"]:
        values["log"] = os.path.join(values["cwd"], values["log"])
    return Step(id=sid, **values)


def _check_needs(graph: Mapping[str, tuple[str, ...]], problems: Problems, families: Sequence[Family] = ()) -> None:
    """Every need names a step; with families, an instance id is checked once they are made."""
    for sid, needs in graph.items():
        for dep in needs:
            if dep == sid:
                problems.add(f"steps.{sid}", "needs", "a step cannot need itself")
            elif dep not in graph and not (families and is_instance(dep)):
                problems.add(f"steps.{sid}", "needs", f"unknown step {dep!r} in needs{did_you_mean(dep, graph)}")


def _job_name(job: Mapping[str, Any], path: Path, override: str | None,
              problems: Problems) -> str | None:
    if override is not None:
        check_job_name(override, "--job")
        return override
    if "name" not in job:
        name = default_job_name(path)
        bad = _id_problem(name, "job name")
        if bad:
            problems.add("job", None, f"no [job] name, and the one taken from the file name is a {bad}; "
                         "set [job] name = \"...\" or pass --job NAME")
            return None
        return name
    name = job["name"]
    if not isinstance(name, str):
        problems.add("job", "name", "expected a string")
        return None
    bad = _id_problem(name, "job name")
    if bad:
        problems.add("job", "name", bad)
        return None
    return name
