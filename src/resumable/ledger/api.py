"""The ledger's Python API: what ``resumable checkpoint`` can do, a program can do.

    from resumable import ledger
    ledger.write("OMN-2143", "a1b2c3d4", "implement",
                 {"branch_name": "feat/x", "commit_sha": "a1b2c3d"})      # attempt assigned
    ledger.read("OMN-2143", "a1b2c3d4", "implement").checkpoint
    ledger.validate_stored("OMN-2143", "a1b2c3d4", "implement", root=".", repos=["."])
    ledger.list_checkpoints("OMN-2143").checkpoints
    ledger.resume_point("OMN-2143", "a1b2c3d4").resume_phase

Errors (bad ids, a taken attempt, I/O) raise ``resumable.errors`` exceptions; "not found" is a result
with ``success=False``, as in OmniNode's handlers. ``phases`` is a ``PhaseSet``, a TOML file path, or
None for the five default phases; ``base_dir`` as in ``layout.resolve_base_dir``.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from resumable.errors import InvalidInputError
from resumable.ledger import layout, store
from resumable.ledger.ids import name_problem, normalize_run_id
from resumable.ledger.model import Checkpoint, Schema, build, now_utc, parse, schema_for, to_dict
from resumable.ledger.model import CheckpointInvalid as CheckpointInvalid
from resumable.ledger.phases import PhaseSet, load_phases

if TYPE_CHECKING:
    from resumable.ledger import checks

PhasesArg = PhaseSet | str | os.PathLike[str] | None
BaseArg = str | os.PathLike[str] | None


class WriteResult(msgspec.Struct, frozen=True):
    checkpoint_path: str
    attempt_number: int
    correlation_id: str
    success: bool = True

    def __bool__(self) -> bool:
        return self.success


class ReadResult(msgspec.Struct, frozen=True):
    success: bool
    correlation_id: str
    checkpoint: Checkpoint | None = None
    checkpoint_path: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.success


class ValidateResult(msgspec.Struct, frozen=True):
    is_valid: bool
    correlation_id: str
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    checkpoint: Checkpoint | None = None
    success: bool = True  # False when the checkpoint could not be read at all

    def __bool__(self) -> bool:
        return self.is_valid


class ListResult(msgspec.Struct, frozen=True):
    checkpoints: tuple[Checkpoint, ...]
    correlation_id: str
    warnings: tuple[str, ...] = ()
    success: bool = True

    @property
    def count(self) -> int:
        return len(self.checkpoints)


def schema_of(phases: PhasesArg) -> Schema:
    if phases is None or isinstance(phases, PhaseSet):
        return schema_for(phases if phases is not None else load_phases(None))
    return schema_for(_loaded_phases(os.fspath(phases)))


_PHASE_FILES: dict[str, PhaseSet] = {}


def _loaded_phases(path: str) -> PhaseSet:
    if path not in _PHASE_FILES:
        _PHASE_FILES[path] = load_phases(path)
    return _PHASE_FILES[path]


def correlation(value: object = None) -> str:
    """``value`` as a canonical UUID string, or a new one (OmniNode's handlers do the same)."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    return str(uuid.uuid4())


def _ticket(ticket_id: object) -> str:
    problem = name_problem(ticket_id, "ticket_id")
    if problem:
        raise InvalidInputError(problem)
    assert isinstance(ticket_id, str)
    return ticket_id


def _phase(phase: object, schema: Schema) -> str:
    if not isinstance(phase, str) or schema.phases.get(phase) is None:
        raise InvalidInputError(schema.phases.invalid_phase(phase))
    return phase


def checkpoint_document(ticket_id: str, run_id: str, phase: str, payload: Mapping[str, Any] | None = None, *,
                        attempt: int = 1, repo_commit_map: Mapping[str, Any] | None = None,
                        artifact_paths: Sequence[Any] | None = None,
                        timestamp: str | dt.datetime | None = None) -> dict[str, Any]:
    """The document OmniNode's CLI builds from its flags (the payload's ``phase`` is forced)."""
    return {
        "schema_version": "1.0.0",
        "run_id": normalize_run_id(run_id),
        "ticket_id": ticket_id,
        "phase": phase,
        "timestamp_utc": timestamp if timestamp is not None else now_utc(),
        "repo_commit_map": dict(repo_commit_map or {}),
        "artifact_paths": list(artifact_paths or ()),
        "attempt_number": attempt,
        "phase_payload": {**(payload or {}), "phase": phase},
    }


def write(ticket_id: str, run_id: str, phase: str, payload: Mapping[str, Any] | None = None, *,
          attempt: int | None = None, repo_commit_map: Mapping[str, Any] | None = None,
          artifact_paths: Sequence[Any] | None = None, timestamp: str | dt.datetime | None = None,
          base_dir: BaseArg = None, phases: PhasesArg = None, correlation_id: object = None) -> WriteResult:
    """Record that ``phase`` completed. Without ``attempt`` the next free number is taken atomically;
    a given one that exists is refused (RefusedError)."""
    schema = schema_of(phases)
    _phase(phase, schema)
    _ticket(ticket_id)
    base = layout.resolve_base_dir(base_dir)
    document = checkpoint_document(ticket_id, run_id, phase, payload, attempt=1 if attempt is None else attempt,
                                   repo_commit_map=repo_commit_map, artifact_paths=artifact_paths,
                                   timestamp=timestamp)
    checkpoint, errors = build(document, schema)
    if checkpoint is None:
        raise InvalidInputError(f"Invalid checkpoint: {'; '.join(errors)}")
    from resumable.ledger import writer

    path, used = writer.write(base, checkpoint, schema, assign_attempt=attempt is None)
    return WriteResult(path, used, correlation(correlation_id))


def write_checkpoint(checkpoint: Checkpoint | Mapping[str, Any] | None, *, base_dir: BaseArg = None,
                     phases: PhasesArg = None, correlation_id: object = None) -> WriteResult:
    """Write a whole checkpoint (a ``Checkpoint`` or its document), attempt number as given."""
    schema = schema_of(phases)
    if checkpoint is None:
        raise InvalidInputError("write_checkpoint requires a 'checkpoint'")
    if isinstance(checkpoint, Checkpoint):
        document: Any = to_dict(checkpoint)
    elif isinstance(checkpoint, Mapping):
        document = dict(checkpoint)
    else:
        raise InvalidInputError(f"Unexpected checkpoint type: {type(checkpoint).__name__}")
    built, errors = build(document, schema)
    if built is None:
        raise InvalidInputError(f"Invalid checkpoint data: {'; '.join(errors)}")
    from resumable.ledger import writer

    path, used = writer.write(layout.resolve_base_dir(base_dir), built, schema, assign_attempt=False)
    return WriteResult(path, used, correlation(correlation_id))


def read(ticket_id: str, run_id: str, phase: str, *, base_dir: BaseArg = None, phases: PhasesArg = None,
         correlation_id: object = None) -> ReadResult:
    """The newest valid attempt of ``phase``; newer corrupt attempts are named in ``warnings``."""
    schema = schema_of(phases)
    corr = correlation(correlation_id)
    _phase(phase, schema)
    ticket = _ticket(ticket_id)
    run = normalize_run_id(run_id)
    found = store.newest_valid(layout.resolve_base_dir(base_dir), ticket, run, phase, schema)
    warnings = tuple(f"Skipped corrupt checkpoint file {f.rel}: {f.problem}" for f in found.skipped)
    if not found.run_exists:
        return ReadResult(False, corr, error=f"Checkpoint directory not found: {run}")
    if found.found is None:
        if found.skipped:
            return ReadResult(False, corr, error=found.skipped[0].corrupt_message, warnings=warnings[1:])
        return ReadResult(False, corr, error=f"No checkpoint found for phase {phase}")
    return ReadResult(True, corr, found.found.checkpoint, found.found.rel, warnings=warnings)


def validate(checkpoint: Checkpoint | Mapping[str, Any] | None, *, root: str | os.PathLike[str] | None = None,
             repos: Sequence[str] | checks.Repos | None = None, phases: PhasesArg = None,
             now: dt.datetime | None = None, correlation_id: object = None) -> ValidateResult:
    """Check a checkpoint (object or document): the model's rules as errors, OmniNode's warnings,
    and with ``root``/``repos`` its artifacts and commits. Pure except for the clock and those."""
    from resumable.ledger import checks

    schema = schema_of(phases)
    corr = correlation(correlation_id)
    if isinstance(checkpoint, Checkpoint):
        document: Any = to_dict(checkpoint)
    elif isinstance(checkpoint, Mapping):
        document = dict(checkpoint)
    else:
        return ValidateResult(False, corr, ("checkpoint field is missing or has unexpected type",))
    built, errors = build(document, schema)
    if built is None:
        return ValidateResult(False, corr, tuple(errors))
    warnings = checks.warnings_of(built, now or now_utc())
    problems: list[str] = []
    if root is not None:
        problems.extend(checks.root_problems(built, os.fspath(root)))
    repo_set = repos if isinstance(repos, checks.Repos) else checks.Repos.parse(list(repos or ()))
    if repo_set:
        problems.extend(checks.repo_problems(built, schema, repo_set, {}))
    return ValidateResult(not problems, corr, tuple(problems), tuple(warnings), built)


def validate_stored(ticket_id: str, run_id: str, phase: str, *, root: str | os.PathLike[str] | None = None,
                    repos: Sequence[str] | checks.Repos | None = None, base_dir: BaseArg = None,
                    phases: PhasesArg = None, now: dt.datetime | None = None,
                    correlation_id: object = None) -> ValidateResult:
    """Read the newest valid attempt of ``phase``, then ``validate`` it (what the CLI does)."""
    found = read(ticket_id, run_id, phase, base_dir=base_dir, phases=phases, correlation_id=correlation_id)
    if not found.success or found.checkpoint is None:
        return ValidateResult(False, found.correlation_id, (found.error or "Checkpoint not found",),
                              found.warnings, success=False)
    result = validate(found.checkpoint, root=root, repos=repos, phases=phases, now=now,
                      correlation_id=found.correlation_id)
    return ValidateResult(result.is_valid, result.correlation_id, result.errors,
                          found.warnings + result.warnings, result.checkpoint)


def list_checkpoints(ticket_id: str, run_id: str | None = None, *, base_dir: BaseArg = None,
                     phases: PhasesArg = None, correlation_id: object = None) -> ListResult:
    """Every valid checkpoint of a ticket (or one run), by run (first write), phase, attempt; corrupt
    files are skipped and named in ``warnings``."""
    schema = schema_of(phases)
    corr = correlation(correlation_id)
    ticket = _ticket(ticket_id)
    run = None if run_id is None else normalize_run_id(run_id)
    runs = store.read_ticket(layout.resolve_base_dir(base_dir), ticket, run, schema)
    found: list[Checkpoint] = []
    warnings: list[str] = []
    for stored_run in runs:
        if stored_run.problem is not None:
            warnings.append(f"Skipping {ticket}/{stored_run.run_id}: {stored_run.problem}")
        for f in stored_run.files:
            if f.checkpoint is not None:
                found.append(f.checkpoint)
            else:
                warnings.append(f"Skipping corrupt checkpoint {f.rel}: {f.problem}")
    return ListResult(tuple(found), corr, tuple(warnings))


def stored_runs(ticket_id: str, run_id: str | None = None, *, base_dir: BaseArg = None,
                phases: PhasesArg = None) -> list[store.StoredRun]:
    """Every checkpoint file of a ticket with its validity (what ``show`` draws)."""
    schema = schema_of(phases)
    run = None if run_id is None else normalize_run_id(run_id)
    return store.read_ticket(layout.resolve_base_dir(base_dir), _ticket(ticket_id), run, schema)


def parse_checkpoint(document: Mapping[str, Any], phases: PhasesArg = None) -> Checkpoint:
    """A ``Checkpoint`` from its document; raises ``CheckpointInvalid`` listing what is wrong."""
    return parse(dict(document), schema_of(phases))
