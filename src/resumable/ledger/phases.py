"""The ordered phases of a pipeline and the schema of each phase's payload.

The default is OmniNode's five phases, with the ordinals its code bakes into file names
(``implement`` 1 ... ``ready_for_merge`` 5). A project can declare its own in a TOML file::

    format = 1                      # of this file; a newer one is refused, never guessed at

    [[phase]]
    name = "build"                  # a-z, 0-9, _ (it becomes part of file names)
    ordinal = 1                     # optional: the previous one + 1; never renumber a used phase
    [phase.payload]
    artifact = { type = "str", min_length = 1 }
    sha = "sha"                     # shorthand for { type = "sha" }
    tests = { type = "list[str]", default = [] }

Field types: ``str``, ``sha`` (7-40 lower-case hex), ``int``, ``float``, ``bool``, ``datetime``
(timezone-aware, stored in UTC) and ``list[str]``. Constraints: ``min_length``/``max_length``
(str, list[str]), ``ge``/``le`` (int, float). A field with a ``default`` is optional. Payload keys are
written in the order declared, after ``phase``.

Pure data (frozen msgspec Structs: cheap to define, unlike dataclasses, on a CLI path) and a loader;
the typed model built from it is in ``model``.
"""

from __future__ import annotations

import math
from functools import cached_property

import msgspec

from resumable.errors import InvalidInputError
from resumable.ledger.ids import phase_name_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Bad = Callable[[str], InvalidInputError]

PHASES_FORMAT = 1
KINDS = ("str", "sha", "int", "float", "bool", "datetime", "list[str]")
_CONSTRAINTS = {
    "str": ("min_length", "max_length"),
    "list[str]": ("min_length", "max_length"),
    "int": ("ge", "le"),
    "float": ("ge", "le"),
}


class FieldSpec(msgspec.Struct, frozen=True):
    name: str
    kind: str
    required: bool = True
    default: object = None
    min_length: int | None = None
    max_length: int | None = None
    ge: float | None = None
    le: float | None = None


class PhaseSpec(msgspec.Struct, frozen=True):
    name: str
    ordinal: int
    fields: tuple[FieldSpec, ...]


class PhaseSet(msgspec.Struct, frozen=True, dict=True):  # dict: room for the cached index below
    phases: tuple[PhaseSpec, ...]
    source: str = "built-in"

    def names(self) -> list[str]:
        return [p.name for p in self.phases]

    @cached_property
    def _by_name(self) -> dict[str, PhaseSpec]:
        return {p.name: p for p in self.phases}

    def get(self, name: str) -> PhaseSpec | None:
        # An index, not a scan: a write looks phases up several times, and a pipeline may declare
        # thousands (a scan per look-up made loading 20,000 phases take seconds).
        return self._by_name.get(name)

    def invalid_phase(self, phase: object) -> str:
        """OmniNode's message for a phase outside the list (it names every valid one)."""
        return f"Invalid phase: {phase}. Valid: {self.names()}"


def _sha(name: str) -> FieldSpec:
    return FieldSpec(name, "sha")


def _strings(name: str) -> FieldSpec:
    return FieldSpec(name, "list[str]", required=False, default=())


DEFAULT_PHASES = PhaseSet((
    PhaseSpec("implement", 1, (FieldSpec("branch_name", "str", min_length=1, max_length=512),
                               _sha("commit_sha"), _strings("files_changed"))),
    PhaseSpec("local_review", 2, (FieldSpec("iteration_count", "int", ge=1), _strings("issue_fingerprints"),
                                  _sha("last_clean_sha"))),
    PhaseSpec("create_pr", 3, (FieldSpec("pr_url", "str", min_length=1), FieldSpec("pr_number", "int", ge=1),
                               _sha("head_sha"))),
    PhaseSpec("pr_release_ready", 4, (_sha("last_review_sha"), _strings("issue_fingerprints"))),
    PhaseSpec("ready_for_merge", 5, (FieldSpec("label_applied_at", "datetime"),)),
))


def load_phases(path: str | None) -> PhaseSet:
    """The phases declared in the TOML file ``path`` (the defaults when None)."""
    if path is None:
        return DEFAULT_PHASES
    import os
    import tomllib

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidInputError(f"cannot read phases file {path}: {exc.strerror}") from exc
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInputError(f"phases file {path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read()
    finally:
        os.close(fd)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInputError(f"phases file {path} is not valid TOML: {exc}") from exc
    return parse_phases(data, path)


def parse_phases(data: dict[str, object], source: str) -> PhaseSet:
    def bad(message: str) -> InvalidInputError:
        return InvalidInputError(f"phases file {source}: {message}")

    unknown = set(data) - {"format", "phase"}
    if unknown:
        raise bad(f"unknown key {sorted(unknown)[0]!r} (expected 'format' and [[phase]] tables)")
    version = data.get("format", PHASES_FORMAT)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise bad(f"format must be a positive integer, got {version!r}")
    if version > PHASES_FORMAT:
        raise bad(f"format {version} is newer than this resumable understands ({PHASES_FORMAT}); upgrade")
    tables = data.get("phase")
    if not isinstance(tables, list) or not tables:
        raise bad("declare at least one [[phase]] table")
    phases: list[PhaseSpec] = []
    names: set[str] = set()
    previous = 0
    for table in tables:
        if not isinstance(table, dict):
            raise bad("every [[phase]] entry must be a table")
        phase = _parse_phase(table, previous, bad)
        if phase.name in names:
            raise bad(f"phase {phase.name!r} is declared twice")
        names.add(phase.name)
        phases.append(phase)
        previous = phase.ordinal
    return PhaseSet(tuple(phases), source)


def _parse_phase(table: dict[str, object], previous: int, bad: Bad) -> PhaseSpec:
    unknown = set(table) - {"name", "ordinal", "payload"}
    if unknown:
        raise bad(f"unknown key {sorted(unknown)[0]!r} in a [[phase]] table")
    name = table.get("name")
    problem = phase_name_problem(name)
    if problem:
        raise bad(problem)
    assert isinstance(name, str)
    ordinal = table.get("ordinal", previous + 1)
    if not isinstance(ordinal, int) or isinstance(ordinal, bool) or ordinal <= previous:
        raise bad(f"phase {name!r}: ordinal must be an integer above the previous phase's ({previous}), "
                  f"got {ordinal!r}")
    payload = table.get("payload", {})
    if not isinstance(payload, dict):
        raise bad(f"phase {name!r}: payload must be a table of field = type")
    fields = tuple(_parse_field(name, key, spec, bad) for key, spec in payload.items())
    return PhaseSpec(name, ordinal, fields)


def _parse_field(phase: str, key: str, spec: object, bad: Bad) -> FieldSpec:
    where = f"phase {phase!r}, field {key!r}"
    if not key.isidentifier() or key == "phase" or key.startswith("_"):
        raise bad(f"{where}: a field name must be an identifier other than 'phase' (not starting with _)")
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise bad(f"{where}: expected a type name or a table with 'type'")
    kind = spec.get("type")
    if kind not in KINDS:
        raise bad(f"{where}: type must be one of {', '.join(KINDS)}, got {kind!r}")
    assert isinstance(kind, str)
    allowed = {"type", "default", *_CONSTRAINTS.get(kind, ())}
    unknown = set(spec) - allowed
    if unknown:
        raise bad(f"{where}: {sorted(unknown)[0]!r} does not apply to type {kind}")
    limits: dict[str, float | None] = {}
    for limit in ("min_length", "max_length", "ge", "le"):
        value = spec.get(limit)
        integral = limit.endswith("length") or kind == "int"
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or (integral and not isinstance(value, int))
                                  or (isinstance(value, float) and not math.isfinite(value))
                                  or (limit.endswith("length") and value < 0)):
            raise bad(f"{where}: {limit} must be a{' non-negative' if limit.endswith('length') else ''} "
                      f"{'integer' if integral else 'number'}, got {value!r}")
        limits[limit] = value
    required = "default" not in spec
    default = spec.get("default")
    if not required and not _default_fits(kind, default):
        raise bad(f"{where}: default {default!r} is not a {kind}")
    if kind == "list[str]" and isinstance(default, list):
        default = tuple(default)
    min_length, max_length = limits["min_length"], limits["max_length"]
    return FieldSpec(key, kind, required, default,
                     None if min_length is None else int(min_length),
                     None if max_length is None else int(max_length), limits["ge"], limits["le"])


def _default_fits(kind: str, value: object) -> bool:
    from resumable.ledger.ids import is_sha

    if kind == "str":
        return isinstance(value, str)
    if kind == "sha":
        return is_sha(value)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False  # datetime: no default (a fixed instant as a default is never what is meant)
