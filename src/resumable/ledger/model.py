"""The checkpoint as a frozen, strict msgspec Struct, and the one set of rules that decides whether
a document is a checkpoint.

OmniNode had two rule sets that disagreed (its model took a commit SHA of any length, its validator
wanted 7-40 characters, so a checkpoint could be written and then fail validation; three of its six
validator rules could never fire on a model-built object). Here ``build`` is the only judge: the
writer, the readers and ``validate`` all call it, and its messages are OmniNode's validator's words.

Strict means no coercion: ``"5"`` is not an int, ``true`` is not an int, ``5.0`` is not an int.
Timestamps must carry a timezone and are stored in UTC (``...Z``), as OmniNode's model does.

Why msgspec and not Pydantic (OmniNode's choice): the checkpoint commands are short processes called
from shell scripts; msgspec adds ~6 ms to a CLI call's start-up, Pydantic ~100 ms (measured by
``benchmarks/ledger.py``), for the same frozen, strict, extra-forbidding model.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any

import msgspec

from resumable.ledger.ids import is_sha, name_problem
from resumable.ledger.phases import FieldSpec, PhaseSet, PhaseSpec

SCHEMA_VERSION = "1.0.0"
UTC = dt.UTC


class Payload(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="phase"):
    """Base of the per-phase payload types; each is built from a ``PhaseSpec`` (tag = phase name)."""


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A completed phase. Field order is OmniNode's YAML key order."""

    schema_version: str = SCHEMA_VERSION
    run_id: uuid.UUID
    ticket_id: str
    phase: str
    timestamp_utc: dt.datetime
    repo_commit_map: dict[str, str] = {}
    artifact_paths: tuple[str, ...] = ()
    attempt_number: int = 1
    phase_payload: Payload


class _Raw(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The header decoded first; the payload is decoded by its own phase's type (so a header/payload
    disagreement is reported as such, in OmniNode's words, not as an odd union error)."""

    schema_version: str = SCHEMA_VERSION
    run_id: uuid.UUID
    ticket_id: str
    phase: str
    timestamp_utc: dt.datetime
    repo_commit_map: dict[str, str] = {}
    artifact_paths: tuple[str, ...] = ()
    attempt_number: int = 1
    phase_payload: dict[str, Any]


class CheckpointInvalid(ValueError):
    """A document that is not a valid checkpoint; ``errors`` are one-line messages."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = tuple(errors)


class Schema(msgspec.Struct, frozen=True):
    """The typed model of one ``PhaseSet``: a payload Struct per phase, each made on first use
    (a write needs one; making all of a large pipeline's would cost every write their number)."""

    phases: PhaseSet
    payloads: dict[str, type[Payload]] = msgspec.field(default_factory=dict)

    def ordinal(self, phase: str) -> int | None:
        spec = self.phases.get(phase)
        return None if spec is None else spec.ordinal

    def payload_type(self, spec: PhaseSpec) -> type[Payload]:
        made = self.payloads.get(spec.name)
        if made is None:
            made = self.payloads[spec.name] = _payload_type(spec)
        return made


_SCHEMAS: dict[int, Schema] = {}


def schema_for(phases: PhaseSet) -> Schema:
    cached = _SCHEMAS.get(id(phases))
    if cached is None or cached.phases is not phases:
        cached = Schema(phases)
        _SCHEMAS[id(phases)] = cached
    return cached


def _payload_type(spec: PhaseSpec) -> type[Payload]:
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in spec.fields:
        kind = _field_type(field)
        fields.append((field.name, kind) if field.required else (field.name, kind, field.default))
    made: Any = msgspec.defstruct(spec.name, fields, bases=(Payload,), tag=spec.name, kw_only=True)
    return made  # type: ignore[no-any-return]


def _field_type(field: FieldSpec) -> Any:
    base: Any = {"str": str, "sha": str, "int": int, "float": float, "bool": bool, "datetime": dt.datetime,
                 "list[str]": tuple[str, ...]}[field.kind]
    meta: dict[str, Any] = {k: v for k, v in (("min_length", field.min_length), ("max_length", field.max_length),
                                              ("ge", field.ge), ("le", field.le)) if v is not None}
    return Annotated[base, msgspec.Meta(**meta)] if meta else base


def build(data: object, schema: Schema) -> tuple[Checkpoint | None, list[str]]:
    """(checkpoint, []) for a valid document, else (None, errors). Never raises for bad data."""
    if not isinstance(data, dict):
        return None, [f"expected mapping, got {type(data).__name__}"]
    unencodable = lone_surrogate(data)
    if unencodable:
        return None, [unencodable]
    try:
        raw = msgspec.convert(data, _Raw)
    except msgspec.ValidationError as exc:
        return None, [str(exc)]
    errors: list[str] = []
    if raw.attempt_number < 1:
        errors.append(f"attempt_number must be >= 1, got {raw.attempt_number}")
    problem = name_problem(raw.ticket_id, "ticket_id")
    if problem:
        errors.append(problem)
    errors.extend(artifact_path_problems(raw.artifact_paths))
    for repo, sha in raw.repo_commit_map.items():
        if not is_sha(sha):
            errors.append(f"Invalid commit SHA for repo '{repo}': '{sha}'")
    timestamp = _utc(raw.timestamp_utc, "timestamp_utc", errors)
    payload = _payload(raw, schema, errors)
    if errors or payload is None or timestamp is None:
        return None, errors
    checkpoint = Checkpoint(schema_version=raw.schema_version, run_id=raw.run_id, ticket_id=raw.ticket_id,
                            phase=raw.phase, timestamp_utc=timestamp, repo_commit_map=raw.repo_commit_map,
                            artifact_paths=raw.artifact_paths, attempt_number=raw.attempt_number,
                            phase_payload=payload)
    return checkpoint, []


def parse(data: object, schema: Schema) -> Checkpoint:
    checkpoint, errors = build(data, schema)
    if checkpoint is None:
        raise CheckpointInvalid(errors)
    return checkpoint


def lone_surrogate(data: object) -> str | None:
    """Where ``data`` holds a string no UTF-8 file can hold (a lone surrogate, as JSON's
    ``"\\ud800"`` decodes to), or None. Written, such a checkpoint would read back as corrupt; the
    durable API refuses them too. Walked without recursion (a checkpoint is small; a deep value is
    refused by the model, not here)."""
    stack: list[tuple[object, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (f"{where or 'a string'} holds a lone surrogate \\u{ord(value[exc.start]):04x}: "
                        "not valid Unicode, and no UTF-8 file can hold it")
        elif isinstance(value, dict):
            for key, item in value.items():
                here = f"{where}.{key}" if where else str(key)
                stack.append((item, here))
                stack.append((key, f"a key of {where or 'the checkpoint'}"))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None


def artifact_path_problems(paths: tuple[str, ...]) -> list[str]:
    problems = []
    for path in paths:
        if "\x00" in path:
            problems.append(f"NUL character forbidden in artifact path: {path!r}")
        elif path.startswith("/"):
            problems.append(f"Absolute artifact path forbidden: {path}")
        elif ".." in path.split("/"):
            problems.append(f"Path traversal segment '..' forbidden in artifact path: '{path}'")
    return problems


def _utc(value: dt.datetime, name: str, errors: list[str]) -> dt.datetime | None:
    if value.tzinfo is None or value.utcoffset() is None:
        errors.append(f"{name} must be timezone-aware (use datetime.now(UTC))")
        return None
    try:
        return value if value.tzinfo is UTC else value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-23:59 is past the last instant a datetime holds in UTC
        errors.append(f"{name} {value.isoformat()} is out of range: in UTC it falls outside years 1-9999")
        return None


def _payload(raw: _Raw, schema: Schema, errors: list[str]) -> Payload | None:
    spec = schema.phases.get(raw.phase)
    if spec is None:
        errors.append(schema.phases.invalid_phase(raw.phase))
        return None
    said = raw.phase_payload.get("phase")
    if said != raw.phase:
        errors.append(f"Phase mismatch: header says '{raw.phase}', payload says '{said}'")
        return None
    try:
        payload = msgspec.convert(raw.phase_payload, schema.payload_type(spec))
    except msgspec.ValidationError as exc:
        errors.append(str(exc).replace("at `$", "at `$.phase_payload"))
        return None
    changes: dict[str, dt.datetime] = {}
    for field in spec.fields:
        value = getattr(payload, field.name)
        if field.kind == "sha" and not is_sha(value):
            errors.append(f"Invalid commit SHA for phase_payload.{field.name}: '{value}'")
        elif field.kind == "datetime":
            utc = _utc(value, field.name, errors)
            if utc is not None and utc is not value:
                changes[field.name] = utc
    return msgspec.structs.replace(payload, **changes) if changes else payload


def to_dict(checkpoint: Checkpoint) -> dict[str, Any]:
    """OmniNode's ``model_dump(mode="json")``: same keys, same order, UUID and datetimes as strings,
    tuples as lists."""
    plain: dict[str, Any] = _lists(msgspec.to_builtins(checkpoint))
    return plain


def _lists(value: Any) -> Any:
    if type(value) is dict:
        return {k: _lists(v) for k, v in value.items()}
    if type(value) is tuple or type(value) is list:
        return [_lists(v) for v in value]
    return value


def now_utc() -> dt.datetime:
    return dt.datetime.now(UTC)
