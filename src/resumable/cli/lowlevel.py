"""The low-level verbs (``init unit phase get resume item resolve validation finalize gc``).

They parse arguments exactly as ulpi's ``checkpoint.mjs`` did (``opt(name)`` takes the token
after the first occurrence of ``name`` and refuses a missing value or one starting with ``--``;
csv lists are split, trimmed, empties dropped), so scripts written against checkpoint.mjs keep working
with only the command name changed. The parser is a small table rather than click because these
verbs are called thousands of times from shell loops and importing click alone costs more than
the rest of a call; ``resumable <verb> --help`` still goes through click (cli.py).
"""

from __future__ import annotations

import sys

from resumable.core import jsonio
from resumable.core.model import PHASE_STATES, UNIT_STATES, split_csv
from resumable.errors import InvalidInputError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from resumable.core.types import RunDocument

USAGE = (
    "usage: resumable <init|unit|phase|get|resume|item|resolve|validation|finalize|gc>"
    " <file.json|run-id> ... (resumable --help for more)"
)

# verb -> (value options, boolean flags)
OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "init": (
        frozenset({"--task", "--units", "--id", "--launch", "--required-phases", "--dir", "--store"}),
        frozenset({"--require-validation"}),
    ),
    "unit": (frozenset({"--note", "--deps", "--dir", "--store"}), frozenset()),
    "phase": (frozenset({"--dir", "--store"}), frozenset()),
    "get": (frozenset({"--dir", "--store"}), frozenset({"--summary"})),
    "resume": (frozenset({"--dir", "--store"}), frozenset()),
    "item": (frozenset({"--json", "--dir", "--store"}), frozenset()),
    "resolve": (frozenset({"--ids", "--json", "--dir", "--store"}), frozenset()),
    "validation": (frozenset({"--note", "--dir", "--store"}), frozenset()),
    "finalize": (frozenset({"--result", "--dir", "--store"}), frozenset()),
    "gc": (frozenset({"--keep-days", "--dir", "--store"}), frozenset()),
}


class Args:
    """Argument access, as checkpoint.mjs's, over one verb's tokens."""

    def __init__(self, verb: str, tokens: list[str]) -> None:
        self.verb = verb
        self.tokens = tokens
        values, flags = OPTIONS[verb]
        self.run: Any = None  # the run the verb opened, once it has
        self.positionals: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.startswith("--"):
                name = tok.split("=", 1)[0]
                if name in values:
                    i += 1 if "=" in tok else 2
                    continue
                if tok in flags:
                    i += 1
                    continue
                raise UsageError(f"unknown option {tok} for {verb} (resumable {verb} --help)")
            self.positionals.append(tok)
            i += 1

    def opt(self, name: str) -> str | None:
        for i, tok in enumerate(self.tokens):
            if tok == name:
                if i + 1 >= len(self.tokens) or self.tokens[i + 1].startswith("--"):
                    raise UsageError(f"option {name} is missing its value")
                return self.tokens[i + 1]
            if tok.startswith(name + "="):
                value = tok[len(name) + 1 :]
                if not value:
                    raise UsageError(f"option {name} is missing its value")
                return value
        return None

    def flag(self, name: str) -> bool:
        return name in self.tokens

    def pos(self, index: int) -> str | None:
        return self.positionals[index] if index < len(self.positionals) else None


def _json_arg(args: Args, name: str, verb: str) -> Any:
    raw = args.opt(name)
    if raw is None:
        return None
    try:
        value = jsonio.loads(raw.encode("utf-8", "surrogateescape"))
    except ValueError as exc:
        raise InvalidInputError(f"{verb} {name} is not valid JSON: {exc}".lstrip()) from exc
    from resumable.core.model import check_nesting

    # The same answer on every Python version: 3.11's scanner refuses deep nesting, 3.13's reads
    # it, and some verbs (resolve) only pick ids out of the value, which never reaches the API's
    # own check.
    check_nesting(value)
    return value


# orjson's import (about 30 ms) pays for itself when printing a document of several thousand
# entries; below that the standard encoder is done before orjson would be loaded.
BIG_PRINT = 5000


def _entries(value: Any) -> int:
    """Entries of the containers a printed value holds at its top (a document's units and items,
    a summary's lists, a resume set's)."""
    if not isinstance(value, dict):
        return 0
    return sum(len(v) for v in value.values() if isinstance(v, (dict, list)))


def _out(value: Any, *, pretty: bool = False) -> None:
    big = pretty and _entries(value) > BIG_PRINT
    data = jsonio.dumps_pretty(value, big=big) if pretty else jsonio.dumps(value)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def _open(args: Args) -> Any:
    from resumable.api import open_run

    target = args.pos(0)
    if target is None:
        raise UsageError(USAGE)
    args.run = open_run(target, runs_dir=args.opt("--dir"), store_url=args.opt("--store"))
    return args.run


def _init(args: Args) -> None:
    task = args.opt("--task")
    if task is None:
        raise UsageError('init requires --task "<desc>"')
    if not task.strip():
        raise InvalidInputError("init requires a task description")
    launch = None
    if args.opt("--launch") is not None:
        from resumable.api import validate_launch

        launch = validate_launch(_json_arg(args, "--launch", ""))  # checkpoint.mjs: "--launch is not valid JSON"
    run = _open(args)
    run_id = run.init(
        task,
        units=split_csv(args.opt("--units")),
        run_id=args.opt("--id"),
        launch=launch,
        required_phases=split_csv(args.opt("--required-phases")),
        require_validation=args.flag("--require-validation"),
    )
    print(run_id)


def _bad_state(what: str, state: str, states: tuple[str, ...]) -> InvalidInputError:
    return InvalidInputError(f"unknown {what} state {state!r}; the states are {', '.join(states)}")


def _unit(args: Args) -> None:
    uid, state = args.pos(1), args.pos(2)
    if uid is None or state is None:
        raise UsageError(f"unit requires <unit-id> <{'|'.join(UNIT_STATES)}>")
    if state not in UNIT_STATES:
        raise _bad_state("unit", state, UNIT_STATES)
    deps_raw = args.opt("--deps")
    _open(args).unit(
        uid, state, note=args.opt("--note"), deps=split_csv(deps_raw) if deps_raw is not None else None
    )


def _phase(args: Args) -> None:
    name, state = args.pos(1), args.pos(2)
    if not name or state is None:
        raise UsageError(f"phase requires <phase> <{'|'.join(PHASE_STATES)}>")
    if state not in PHASE_STATES:
        raise _bad_state("phase", state, PHASE_STATES)
    _open(args).phase(name, state)


def _read(args: Args) -> RunDocument:
    doc: RunDocument = _open(args).handle.read()
    return doc


def _counted(args: Args) -> RunDocument:
    """The document ``get --summary`` and ``resume`` read: a large run's digests where the store
    keeps them (each unit's status and needs: all these verbs look at, without decoding the units
    whole), else the whole document."""
    from resumable.store.backend import DigestReading

    handle = _open(args).handle
    if isinstance(handle, DigestReading):
        view = handle.load_digests()
        if view is not None:
            return view.doc
    doc: RunDocument = handle.read()
    return doc


def _get(args: Args) -> None:
    if args.flag("--summary"):
        from resumable.core.model import summary

        _out(summary(_counted(args)), pretty=True)
    else:
        _out(_read(args), pretty=True)


def _resume(args: Args) -> None:
    from resumable.core.plan import resume_set

    _out(resume_set(_counted(args)), pretty=True)  # checkpoint.mjs prints it indented, as `get`


def _item(args: Args) -> None:
    if args.opt("--json") is None:
        raise UsageError("item requires --json '<object-or-array>'")
    items = _json_arg(args, "--json", "item")
    ids = _open(args).item(items)
    if ids:
        _out(ids)


def _resolve(args: Args) -> None:
    ids_csv = args.opt("--ids")
    if ids_csv is not None:
        ids = split_csv(ids_csv)
    elif args.opt("--json") is not None:
        value = _json_arg(args, "--json", "resolve")
        ids = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    else:
        raise UsageError('resolve requires --ids "id1,id2" (or --json \'["id1",...]\')')
    _out(_open(args).resolve(ids))


def _validation(args: Args) -> None:
    status = args.pos(1)
    if status is None:
        raise UsageError("validation requires <green|red> (aliases: pass/ok/fail)")
    _open(args).validation(status, note=args.opt("--note"))


def _finalize(args: Args) -> None:
    status = args.pos(1)
    if status not in ("done", "needs_attention", "aborted"):
        raise UsageError("finalize requires <done|needs_attention|aborted>")
    _open(args).finalize(status, result=args.opt("--result"))


def _gc(args: Args) -> None:
    from resumable.api import gc

    raw = args.opt("--keep-days")
    keep = 7.0
    if raw is not None:
        try:
            keep = float(raw)
        except ValueError:
            keep = float("nan")
        from resumable.core.durations import MAX_DAYS

        if not 0 <= keep <= MAX_DAYS:
            raise InvalidInputError(f"--keep-days must be a non-negative number, at most {MAX_DAYS}")
    count, archive = gc(args.pos(0) or args.opt("--dir"), keep, store_url=args.opt("--store"))
    if count < 0:
        print("0 archived (no runs dir)")
    else:
        days = f"{keep:g}"
        print(f"{count} archived to {archive} (terminal runs older than {days}d)")


HANDLERS: dict[str, Callable[[Args], None]] = {
    "init": _init,
    "unit": _unit,
    "phase": _phase,
    "get": _get,
    "resume": _resume,
    "item": _item,
    "resolve": _resolve,
    "validation": _validation,
    "finalize": _finalize,
    "gc": _gc,
}


def run_verb(verb: str, tokens: list[str]) -> int:
    """Run one low-level verb; returns the exit code."""
    try:
        args = Args(verb, tokens)
        if verb != "gc" and args.pos(0) is None:
            raise UsageError(USAGE)
        HANDLERS[verb](args)
        stale = args.run.snapshot_error if args.run is not None else None
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        from resumable.cli.errors import report

        return report(exc)
    if stale:
        # The write is durable in the journal (every resumable reader sees it), but a script that
        # cats the snapshot would be misled: say so, and exit 1 as checkpoint.mjs did on a failed write.
        from resumable.cli.errors import report
        from resumable.errors import StoreError

        return report(StoreError(f"{verb} was saved in the journal, but the snapshot file is stale: {stale}"))
    return 0
