"""Job descriptions: a TOML job file or the seed's ``--step ID:COMMAND`` flags -> a :class:`Job`.

Everything here is validated up front: a job that reaches the scheduler has known ids, known
``needs``, no cycles and well-typed values, so a typo never surfaces halfway through a long run.
Errors name the file, the line (found by scanning the text, since tomllib keeps no positions) and
the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumable.core.plan import find_cycles
from resumable.errors import InvalidInputError, UsageError

# Step ids become log file names and unit ids: keep them to a portable, traversal-free alphabet.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

DEFAULT_SHELL: tuple[str, ...] = ("/bin/sh", "-c")
DEFAULT_GRACE = 5.0
DEFAULT_BACKOFF = 1.0
DEFAULT_JITTER = 0.1

_JOB_KEYS = {"name", "timeout", "retries", "backoff", "jitter", "env", "cwd", "shell", "grace"}
_STEP_KEYS = {"run", "needs", "timeout", "retries", "artifacts", "inputs", "env", "cwd", "log",
              "backoff", "jitter", "grace", "shell"}


@dataclass(frozen=True)
class Step:
    """One step, with every default already applied."""

    id: str
    command: str | tuple[str, ...]  # a string runs through ``shell``; a tuple runs as argv
    shell: tuple[str, ...] = DEFAULT_SHELL
    needs: tuple[str, ...] = ()
    timeout: float | None = None
    retries: int = 0
    backoff: float = DEFAULT_BACKOFF
    jitter: float = DEFAULT_JITTER
    grace: float = DEFAULT_GRACE
    artifacts: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # the job's and step's overrides, sorted; not os.environ
    cwd: str = "."  # absolute once the job is loaded
    log: str | None = None  # explicit log path (--step-log); else the runs-dir default

    @property
    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return [*self.shell, self.command]
        return list(self.command)

    @property
    def command_text(self) -> str:
        """The command as the user wrote it, for display and for the seed's "command" field."""
        if isinstance(self.command, str):
            return self.command
        import shlex

        return shlex.join(self.command)


@dataclass(frozen=True)
class Job:
    name: str
    steps: tuple[Step, ...]
    source: str  # the job file path, or "--step flags"
    base_dir: str = field(default=".")

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise UsageError(f"job {self.name!r} has no step {step_id!r}")


def parse_duration(value: object, where: str) -> float:
    """``90``, ``1.5``, ``"90s"``, ``"10m"``, ``"2h"``, ``"250ms"`` -> seconds (> 0)."""
    if isinstance(value, bool):
        raise InvalidInputError(f"{where}: expected a duration like 90, \"90s\", \"10m\" or \"2h\"")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond float range (`timeout = 999...9`)
            raise InvalidInputError(f"{where}: duration must be a finite number >= 0, got a number of"
                                    f" {len(str(abs(value)))} digits") from None
    elif isinstance(value, str) and (m := _DURATION_RE.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise InvalidInputError(
            f"{where}: bad duration {value!r}; expected a number of seconds or \"90s\", \"10m\", \"2h\""
        )
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise InvalidInputError(f"{where}: duration must be a finite number >= 0, got {value!r}")
    return seconds


def check_step_id(step_id: str, where: str) -> str:
    if not _ID_RE.match(step_id):
        raise InvalidInputError(
            f"{where}: bad step id {step_id!r}; use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit)"
        )
    return step_id


# --------------------------------------------------------------------------- TOML job file


class _Locator:
    """Find the line of a table or key in the raw TOML text, for error messages."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, table: str, key: str | None = None) -> int | None:
        header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(
            '(?:"?' + re.escape(p) + '"?)' for p in table.split(".")) + r"\s*\]\s*(#.*)?$")
        start = None
        for n, line in enumerate(self.lines, 1):
            if header.match(line):
                start = n
                break
        if start is None:
            return None
        if key is None:
            return start
        key_re = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
        for n in range(start, len(self.lines)):
            line = self.lines[n]
            if re.match(r"^\s*\[", line):
                break
            if key_re.match(line):
                return n + 1
        return start

    def where(self, table: str, key: str | None = None) -> str:
        line = self.line_of(table, key)
        loc = f"{self.path}:{line}" if line else str(self.path)
        return f"{loc}: [{table}]" + (f" {key}" if key else "")


def _str_list(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidInputError(f"{where}: expected a list of non-empty strings")
    return tuple(value)


def _env(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidInputError(f"{where}: expected a table of NAME = \"value\"")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise InvalidInputError(f"{where}: bad environment variable name {k!r}")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise InvalidInputError(f"{where}: {k} must be a string or a number")
        out[k] = str(v)
    return out


def _int(value: object, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _fraction(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidInputError(f"{where}: expected a number between 0 and 1, got {value!r}")
    return float(value)


def _shell(value: object, where: str) -> tuple[str, ...]:
    # A bare program name gets "-c"; a list is the full prefix (e.g. ["bash", "-euo", "pipefail", "-c"]).
    if isinstance(value, str) and value:
        return (value, "-c")
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise InvalidInputError(f"{where}: expected a shell program or a list like [\"bash\", \"-c\"]")


def _cwd(value: object, base: Path, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{where}: expected a directory path")
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def load_job_file(path: str | os.PathLike[str], name_override: str | None = None) -> Job:
    import tomllib

    from resumable import fsio

    p = Path(path)
    try:
        # Never blocks on a FIFO, never reads a device: a regular file only (a link may lead to it).
        text = fsio.read_bytes(str(p), follow=True).decode("utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"no job file {str(p)!r}; write one (see examples/resumable.toml) or pass --step ID:COMMAND"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{p}: cannot read job file: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of more digits than Python converts
        raise InvalidInputError(f"{p}: not valid TOML: {exc}") from exc
    return job_from_mapping(data, p, text, name_override)


def job_from_mapping(
    data: Mapping[str, Any], path: Path, text: str = "", name_override: str | None = None
) -> Job:
    loc = _Locator(path, text)
    base = path.resolve().parent
    for key in data:
        if key not in ("job", "steps"):
            raise InvalidInputError(f"{loc.where(key)}: unknown table {key!r}; expected [job] and [steps.<id>]")
    job = data.get("job", {})
    if not isinstance(job, dict):
        raise InvalidInputError(f"{path}: [job] must be a table")
    for key in job:
        if key not in _JOB_KEYS:
            raise InvalidInputError(
                f"{loc.where('job', key)}: unknown key {key!r}; known: {', '.join(sorted(_JOB_KEYS))}"
            )
    name = name_override or job.get("name")
    if name is None:
        raise InvalidInputError(f"{loc.where('job')}: missing name (or pass --job NAME)")
    if not isinstance(name, str):
        raise InvalidInputError(f"{loc.where('job', 'name')}: expected a string")
    check_step_id(name, loc.where("job", "name"))
    d_timeout = parse_duration(job["timeout"], loc.where("job", "timeout")) if "timeout" in job else None
    d_retries = _int(job["retries"], loc.where("job", "retries")) if "retries" in job else 0
    d_backoff = (parse_duration(job["backoff"], loc.where("job", "backoff"))
                 if "backoff" in job else DEFAULT_BACKOFF)
    d_jitter = _fraction(job["jitter"], loc.where("job", "jitter")) if "jitter" in job else DEFAULT_JITTER
    d_grace = parse_duration(job["grace"], loc.where("job", "grace")) if "grace" in job else DEFAULT_GRACE
    d_env = _env(job["env"], loc.where("job", "env")) if "env" in job else {}
    d_cwd = _cwd(job["cwd"], base, loc.where("job", "cwd")) if "cwd" in job else str(base)
    d_shell = _shell(job["shell"], loc.where("job", "shell")) if "shell" in job else DEFAULT_SHELL

    steps_data = data.get("steps")
    if not isinstance(steps_data, dict) or not steps_data:
        raise InvalidInputError(f"{path}: no steps; add at least one [steps.<id>] table with run = ...")
    steps: list[Step] = []
    for sid, raw in steps_data.items():
        table = f"steps.{sid}"
        check_step_id(sid, loc.where(table))
        if not isinstance(raw, dict):
            raise InvalidInputError(f"{loc.where(table)}: must be a table")
        for key in raw:
            if key not in _STEP_KEYS:
                raise InvalidInputError(
                    f"{loc.where(table, key)}: unknown key {key!r}; known: {', '.join(sorted(_STEP_KEYS))}"
                )
        if "run" not in raw:
            raise InvalidInputError(f"{loc.where(table)}: missing run = \"command\" (or a list for argv)")
        run = raw["run"]
        command: str | tuple[str, ...]
        if isinstance(run, str) and run.strip():
            command = run
        elif isinstance(run, list) and run and all(isinstance(a, str) for a in run):
            command = tuple(run)
        else:
            raise InvalidInputError(
                f"{loc.where(table, 'run')}: expected a command string or a non-empty list of strings"
            )
        env = dict(d_env)
        if "env" in raw:
            env.update(_env(raw["env"], loc.where(table, "env")))
        cwd = _cwd(raw["cwd"], Path(d_cwd), loc.where(table, "cwd")) if "cwd" in raw else d_cwd
        needs = _str_list(raw["needs"], loc.where(table, "needs")) if "needs" in raw else ()
        log = raw.get("log")
        if log is not None and (not isinstance(log, str) or not log):
            raise InvalidInputError(f"{loc.where(table, 'log')}: expected a file path")
        steps.append(Step(
            id=sid,
            command=command,
            shell=_shell(raw["shell"], loc.where(table, "shell")) if "shell" in raw else d_shell,
            needs=needs,
            timeout=(parse_duration(raw["timeout"], loc.where(table, "timeout"))
                     if "timeout" in raw else d_timeout),
            retries=_int(raw["retries"], loc.where(table, "retries")) if "retries" in raw else d_retries,
            backoff=(parse_duration(raw["backoff"], loc.where(table, "backoff"))
                     if "backoff" in raw else d_backoff),
            jitter=_fraction(raw["jitter"], loc.where(table, "jitter")) if "jitter" in raw else d_jitter,
            grace=parse_duration(raw["grace"], loc.where(table, "grace")) if "grace" in raw else d_grace,
            artifacts=_str_list(raw["artifacts"], loc.where(table, "artifacts")) if "artifacts" in raw else (),
            inputs=_str_list(raw["inputs"], loc.where(table, "inputs")) if "inputs" in raw else (),
            env=tuple(sorted(env.items())),
            cwd=cwd,
            log=os.path.join(cwd, log) if log else None,
        ))
    ids = {s.id for s in steps}
    for s in steps:
        for dep in s.needs:
            if dep not in ids:
                raise InvalidInputError(
                    f"{loc.where('steps.' + s.id, 'needs')}: unknown step {dep!r} in needs"
                )
            if dep == s.id:
                raise InvalidInputError(f"{loc.where('steps.' + s.id, 'needs')}: a step cannot need itself")
    cycles = find_cycles({s.id: s.needs for s in steps})
    if cycles:
        first = cycles[0]
        raise InvalidInputError(
            f"{loc.where('steps.' + first[0], 'needs')}: dependency cycle: {' -> '.join([*first, first[0]])}"
        )
    return Job(name=name, steps=tuple(steps), source=str(path), base_dir=str(base))


# --------------------------------------------------------------------------- seed flags


def _split_pair(value: str, flag: str) -> tuple[str, str]:
    # Split at the FIRST ':' as the seed does, so commands may contain ':' but ids may not.
    sid, sep, rest = value.partition(":")
    if not sep or not sid.strip() or not rest.strip():
        raise UsageError(f"{flag} {value!r}: expected ID:VALUE with a non-empty id and value")
    return sid.strip(), rest


def job_from_flags(
    name: str,
    step_specs: Sequence[str],
    *,
    timeout: float | None = None,
    step_timeouts: Sequence[str] = (),
    step_artifacts: Sequence[str] = (),
    retries: int = 0,
    backoff: float = DEFAULT_BACKOFF,
    step_logs: Sequence[str] = (),
    grace: float = DEFAULT_GRACE,
    cwd: str | None = None,
) -> Job:
    """The seed's flags: steps run one after another in the order given (no ``needs``; the
    scheduler keeps declaration order and stops at the first failure, as the seed does)."""
    check_step_id(name, "--job")
    base = os.path.abspath(cwd or os.getcwd())
    order: list[str] = []
    commands: dict[str, str] = {}
    for spec in step_specs:
        sid, command = _split_pair(spec, "--step")
        check_step_id(sid, f"--step {spec!r}")
        if sid in commands:
            raise UsageError(f"--step {sid!r} given twice; step ids must be unique")
        order.append(sid)
        commands[sid] = command
    if not order:
        raise UsageError("no steps: pass --step ID:COMMAND (repeatable) or a job file")

    def per_step(values: Sequence[str], flag: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for v in values:
            sid, val = _split_pair(v, flag)
            if sid not in commands:
                raise UsageError(f"{flag} {v!r}: no --step with id {sid!r}")
            out.setdefault(sid, "")
            # Several artifacts per id are allowed and all are required (seed [I] choice b).
            out[sid] = f"{out[sid]}\0{val}" if out[sid] else val
        return out

    tmo = per_step(step_timeouts, "--step-timeout")
    arts = per_step(step_artifacts, "--step-artifact")
    logs = per_step(step_logs, "--step-log")
    steps = []
    for sid in order:
        t = timeout
        if sid in tmo:
            t = parse_duration(tmo[sid].split("\0")[-1], f"--step-timeout {sid}")
        log = logs[sid].split("\0")[-1] if sid in logs else None
        steps.append(Step(
            id=sid,
            command=commands[sid],
            timeout=t,
            retries=retries,
            backoff=backoff,
            grace=grace,
            artifacts=tuple(arts[sid].split("\0")) if sid in arts else (),
            cwd=base,
            log=os.path.join(base, log) if log else None,
        ))
    return Job(name=name, steps=tuple(steps), source="--step flags", base_dir=base)
