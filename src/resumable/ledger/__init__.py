"""The phase checkpoint ledger (``resumable checkpoint``): one append-only YAML file per completed
phase of a pipeline run, compatible with OmniNode's ``checkpoint_manager.py`` files.

    <base>/<ticket_id>/<run-uuid>/phase_<ordinal>_<phase>_a<attempt>.yaml

Modules, by concept: ``ids`` (run ids, ticket ids, SHAs), ``phases`` (the ordered phases and
payload schemas, TOML), ``model`` (the typed checkpoint and its one rule set), ``yamlfmt`` (the file
format), ``layout`` (paths and names), ``dirs`` (no-follow directory access), ``store`` (readers),
``writer`` (append-only writes, attempt claims, temp sweep), ``checks`` (validate's evidence checks),
``resume`` (resume point), ``show`` (the table for people), ``api`` (the Python API), ``cli``.

The API is importable from here (``resumable.ledger.write(...)``); names load on first use, so
importing the package costs nothing until then.
"""

from __future__ import annotations

_EXPORTS = {
    "write": "resumable.ledger.api",
    "write_checkpoint": "resumable.ledger.api",
    "read": "resumable.ledger.api",
    "validate": "resumable.ledger.api",
    "validate_stored": "resumable.ledger.api",
    "list_checkpoints": "resumable.ledger.api",
    "stored_runs": "resumable.ledger.api",
    "parse_checkpoint": "resumable.ledger.api",
    "checkpoint_document": "resumable.ledger.api",
    "WriteResult": "resumable.ledger.api",
    "ReadResult": "resumable.ledger.api",
    "ValidateResult": "resumable.ledger.api",
    "ListResult": "resumable.ledger.api",
    "CheckpointInvalid": "resumable.ledger.api",
    "resume_point": "resumable.ledger.resume",
    "ResumePoint": "resumable.ledger.resume",
    "PhaseTrust": "resumable.ledger.resume",
    "Checkpoint": "resumable.ledger.model",
    "Payload": "resumable.ledger.model",
    "SCHEMA_VERSION": "resumable.ledger.model",
    "PhaseSet": "resumable.ledger.phases",
    "PhaseSpec": "resumable.ledger.phases",
    "FieldSpec": "resumable.ledger.phases",
    "DEFAULT_PHASES": "resumable.ledger.phases",
    "load_phases": "resumable.ledger.phases",
    "normalize_run_id": "resumable.ledger.ids",
    "ONEX_NAMESPACE": "resumable.ledger.ids",
    "resolve_base_dir": "resumable.ledger.layout",
}

__all__ = sorted(_EXPORTS)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.ledger.api import CheckpointInvalid as CheckpointInvalid
    from resumable.ledger.api import ListResult as ListResult
    from resumable.ledger.api import ReadResult as ReadResult
    from resumable.ledger.api import ValidateResult as ValidateResult
    from resumable.ledger.api import WriteResult as WriteResult
    from resumable.ledger.api import checkpoint_document as checkpoint_document
    from resumable.ledger.api import list_checkpoints as list_checkpoints
    from resumable.ledger.api import parse_checkpoint as parse_checkpoint
    from resumable.ledger.api import read as read
    from resumable.ledger.api import stored_runs as stored_runs
    from resumable.ledger.api import validate as validate
    from resumable.ledger.api import validate_stored as validate_stored
    from resumable.ledger.api import write as write
    from resumable.ledger.api import write_checkpoint as write_checkpoint
    from resumable.ledger.ids import ONEX_NAMESPACE as ONEX_NAMESPACE
    from resumable.ledger.ids import normalize_run_id as normalize_run_id
    from resumable.ledger.layout import resolve_base_dir as resolve_base_dir
    from resumable.ledger.model import SCHEMA_VERSION as SCHEMA_VERSION
    from resumable.ledger.model import Checkpoint as Checkpoint
    from resumable.ledger.model import Payload as Payload
    from resumable.ledger.phases import DEFAULT_PHASES as DEFAULT_PHASES
    from resumable.ledger.phases import FieldSpec as FieldSpec
    from resumable.ledger.phases import PhaseSet as PhaseSet
    from resumable.ledger.phases import PhaseSpec as PhaseSpec
    from resumable.ledger.phases import load_phases as load_phases
    from resumable.ledger.resume import PhaseTrust as PhaseTrust
    from resumable.ledger.resume import ResumePoint as ResumePoint
    from resumable.ledger.resume import resume_point as resume_point


def __dir__() -> list[str]:
    """What ``dir()``, ``help()`` and an editor's completion list: the names loaded so far and the
    ones that load on first use, without loading them."""
    return sorted({*globals(), *_EXPORTS})


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable.ledger' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
