"""The run model as types: the document, its units, attempts, findings (items), final validation and
launch descriptor, and one ``TypedDict`` per kind of event, discriminated by its ``t``.

These are the shapes resumable *writes*. A stored document may have been edited by hand, so every
reader stays null-safe (``core.model``'s ``units_of``, ``unit_status``, ...) whatever its type says.

Import this module only under ``TYPE_CHECKING`` from anything a low-level verb (``resumable unit``)
loads: ``typing`` alone costs a noticeable share of such a call, and none of these names is needed
at run time (a ``TypedDict`` is a plain ``dict`` there)::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from resumable.core.types import Event, UnitEvent

``tests/typing/`` shows mypy refusing a misspelt key or a wrong state literal.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict

# --- states ------------------------------------------------------------------------------------

RunState = Literal["initializing", "running", "done", "needs_attention", "aborted"]
FinalState = Literal["done", "needs_attention", "aborted"]
UnitState = Literal["pending", "in_progress", "done", "blocked", "dep_blocked", "failed", "timeout",
                    "interrupted"]
PhaseState = Literal["pending", "running", "done", "blocked", "skipped"]
# What one attempt ended as (a step's process, or a durable function's call); "running" while open.
AttemptState = Literal["running", "done", "failed", "timeout", "interrupted"]
ValidationStatus = Literal["green", "red"]
EventKind = Literal["init", "base", "begin", "unit", "invalidate", "phase", "item", "resolve", "validation",
                    "finalize", "map"]

# --- the document ------------------------------------------------------------------------------


class Launch(TypedDict, total=False):
    """How to resume the run: the low-level verbs' ``{scriptPath, args}`` (a script that resumes it),
    or the runner's ``{"kind": "resumable", "argv": [...], "cwd": ...}``."""

    scriptPath: str
    args: dict[str, object]  # the script's own arguments: whatever its author passed
    kind: Literal["resumable"]
    argv: list[str]
    cwd: str


class StepError(TypedDict):
    """What is kept of the exception a durable function's attempt raised."""

    type: str  # its qualified name ("ValueError", "mymodule.Refused")
    message: str
    traceback: NotRequired[str]  # the end of it (none for an error read from a unit's note)


class Attempt(TypedDict, total=False):
    """One try at a unit, in its ``attempts`` (``n`` counts from 1)."""

    n: Required[int]
    status: AttemptState
    startedAt: str
    finishedAt: str
    duration: float  # seconds
    exitCode: int  # a step's process; 128+N when killed by signal N
    signal: int
    reason: str  # why it failed although it exited 0 (a missing artifact)
    error: StepError  # a durable function's exception
    log: str
    pid: int
    host: str
    worker: str


# Why a done unit went back to pending (``Unit.invalidations``): when, why, and the status it had
# (``from`` is a keyword, hence the functional form; a hand-edited unit may have had none).
Invalidation = TypedDict("Invalidation", {"at": str, "reason": str, "from": UnitState | None})


class Unit(TypedDict, total=False):
    """One unit of work (a step of a job, a durable call, or a unit a script declared)."""

    status: Required[UnitState]
    dependsOn: list[str]
    note: str
    createdAt: str
    updatedAt: str
    startedAt: str
    finishedAt: str
    attempts: list[Attempt]
    invalidations: list[Invalidation]
    # Set by the runner (job steps) and the durable engine:
    kind: Literal["step"]
    step: str
    command: str
    log: str
    lastExitCode: int
    fingerprint: str
    fingerprintHost: str
    artifacts: dict[str, FileRecord | None]  # path -> its record (None when missing)
    blockedBy: str
    removed: bool  # a job step no longer in the job file
    version: str | int
    result: Any  # a durable function's value: the user's own data


class FileRecord(TypedDict):
    """A file as the runner recorded it (a step's artifact): enough to tell the same version again."""

    size: int
    mtimeNs: int
    ino: int
    sha256: str


class Fingerprint(TypedDict):
    """What a job step's result depends on, as stored on its unit (``runner.fingerprint``)."""

    v: int
    command: str  # the sha256 of its argv
    env: str  # the sha256 of the environment it sets
    cwd: str
    # input name -> "<sha256> <size> <mtime_ns> <inode>", None for a path no file answers
    inputs: NotRequired[dict[str, str | None]]
    # need -> the digest of its artifacts when the step started (early cutoff, ``core.policy``)
    needs: NotRequired[dict[str, str]]


class StoredResult(TypedDict, total=False):
    """A durable function's recorded value (its unit's ``result``): inline JSON (``value``), a
    serializer's bytes in base64 (``b64``), or a blob of ``size`` bytes named by ``ref``; an array,
    a frame or a tree of them carries its format version ``v`` (durable.formats)."""

    codec: Required[str]  # "json", "npy", "parquet", "tree", or the serializer's name
    value: Any  # the user's own data
    b64: str
    ref: str
    size: int
    v: int
    dtype: Any  # an array's, as .npy writes it (for people reading the record)
    shape: list[int]
    kind: str  # parquet: "frame" or "series"
    name: Any  # a series' name


class Phase(TypedDict, total=False):
    status: Required[PhaseState]
    updatedAt: str
    startedAt: str
    finishedAt: str


class Item(TypedDict, total=False):
    """An open finding (``openItems``); ``id`` is given, or derived from its content
    (``core.events.item_id``). Resolved, it moves to ``resolvedItems`` with ``resolvedAt``."""

    id: str
    at: str
    kind: str
    severity: str
    title: str
    detail: str
    unit: str
    resolvedAt: str


class FinalValidation(TypedDict):
    status: ValidationStatus
    at: str
    note: NotRequired[str]


class RunDocument(TypedDict, total=False):
    """A run's document: what ``cat <runs-dir>/<id>.json`` shows, in this key order."""

    schemaVersion: Required[int]
    id: Required[str]
    task: Required[str]
    status: Required[RunState]
    createdAt: Required[str]
    updatedAt: Required[str]
    phases: Required[dict[str, Phase]]
    units: Required[dict[str, Unit]]
    openItems: Required[list[Item]]
    resolvedItems: Required[list[Item]]
    result: Required[Any]  # what finalize recorded: the caller's own value, or null
    requiredPhases: list[str]
    requireValidation: bool
    launch: Launch
    currentPhase: str
    finalValidation: FinalValidation
    finishedAt: str
    sessionStartedAt: str  # while a runner session is open (``begin`` to ``finalize``)
    ranSeconds: float  # the sessions' summed time
    adoptedEventLog: AdoptedEventLog  # how far ulpi's event log beside the run has been taken in
    maps: dict[str, MapTotal]  # durable step name -> what its last run.map expects (the true total)


class MapTotal(TypedDict, total=False):
    """What the last ``run.map`` of a durable step said it would leave (``map`` event): the step's
    unit count once the map ends, how many were done when it began (for an ETA), when, and its
    rate limit. One per step, replaced by each map: never a record per item."""

    units: Required[int]
    done: int
    startedAt: str
    rate: str  # as given ("50/min")
    interval: float  # its seconds between starts


class AdoptedEventLog(TypedDict):
    """The position in ulpi's event log (``<run>.events.jsonl``) the document has taken in
    (``store.files.ulpi_adoption``): events ulpi appends later are new, and merged."""

    file: str
    events: int  # its complete records then
    afterHash: str  # the last one's


class ResumeSet(TypedDict):
    """What a re-run would do (``core.plan.resume_set``): the done units it skips, the units it can
    start, and each dep-blocked unit with the root of its chain; the diagnostics when asked for."""

    skip: list[str]
    eligible: list[str]
    dep_blocked: dict[str, str]
    unknown_deps: NotRequired[dict[str, list[str]]]  # unit -> the needs that name no unit
    cycles: NotRequired[list[list[str]]]
    malformed: NotRequired[list[str]]  # units without a readable status


RecipeKind = Literal["resumable", "codex-cli", "no-launch", "legacy-workflow", "unreadable"]


class ResumeRecipe(TypedDict, total=False):
    """How to resume a run: ``status --resume --json``'s descriptor (``core.recipe.classify``). A
    runnable one says the command; one that is not says why (``reason``)."""

    runnable: Required[bool]
    kind: Required[RecipeKind]
    run: Any  # the run's id as its document holds it
    command: str
    argv: list[str]
    cwd: str | None
    shell: str  # the command as one line to paste into a shell
    resumeSet: ResumeSet
    migrationOnly: bool
    reason: str
    legacyLaunch: dict[str, object]  # a launch descriptor no one can replay, passed through as found
    file: str  # where the unreadable run is


class Summary(TypedDict):
    """``get --summary``: a run's counts, for scripts."""

    id: object
    status: object
    task: object
    currentPhase: object
    total: int
    done: int
    blocked: list[str]
    dep_blocked: list[str]
    in_progress: list[str]
    updatedAt: object


# --- events ------------------------------------------------------------------------------------
# ``at`` is stamped by the store at commit when the event lacks it (``core.verbs.stamp_batch``);
# ``clock`` is the same time with milliseconds, where a session's length is measured.


class InitEvent(TypedDict):
    t: Literal["init"]
    at: NotRequired[str]
    id: str
    task: str
    units: list[str]
    launch: NotRequired[Launch]
    requiredPhases: NotRequired[list[str]]
    requireValidation: NotRequired[bool]


class BaseEvent(TypedDict):
    """Adopt a whole document (an import, an edit of the snapshot made outside resumable)."""

    t: Literal["base"]
    at: NotRequired[str]
    doc: RunDocument
    reason: NotRequired[str]


class BeginEvent(TypedDict):
    """(Re)open a run for a new runner session."""

    t: Literal["begin"]
    at: NotRequired[str]
    clock: NotRequired[str]
    launch: NotRequired[Launch]


class UnitEvent(TypedDict):
    """A unit's state; with only ``fields`` and the state it already has, its stamps are kept."""

    t: Literal["unit"]
    at: NotRequired[str]
    unit: str
    state: UnitState
    note: NotRequired[str]
    deps: NotRequired[list[str]]
    attempt: NotRequired[Attempt]
    fields: NotRequired[dict[str, Any]]  # free-form unit keys: a caller's own (never the reserved ones)


class InvalidateEvent(TypedDict):
    """The only way a done unit goes back to pending."""

    t: Literal["invalidate"]
    at: NotRequired[str]
    unit: str
    reason: str


class PhaseEvent(TypedDict):
    t: Literal["phase"]
    at: NotRequired[str]
    phase: str
    state: PhaseState


class ItemEvent(TypedDict):
    t: Literal["item"]
    at: NotRequired[str]
    items: object  # an item or a list of them, as the caller gave them: apply keeps a non-object as is


class ResolveEvent(TypedDict):
    t: Literal["resolve"]
    at: NotRequired[str]
    ids: list[str]


class ValidationEvent(TypedDict):
    t: Literal["validation"]
    at: NotRequired[str]
    status: ValidationStatus
    note: NotRequired[str]


class FinalizeEvent(TypedDict):
    t: Literal["finalize"]
    at: NotRequired[str]
    clock: NotRequired[str]
    status: FinalState
    result: NotRequired[str]


class MapEvent(TypedDict):
    """A durable step's ``run.map`` began: the step's unit count once it ends (``units``), how many
    of them were done then, and its rate limit; the document keeps the last one per step (``maps``)."""

    t: Literal["map"]
    at: NotRequired[str]
    step: str
    units: int
    done: NotRequired[int]
    rate: NotRequired[str]
    interval: NotRequired[float]


Event = (InitEvent | BaseEvent | BeginEvent | UnitEvent | InvalidateEvent | PhaseEvent | ItemEvent
         | ResolveEvent | ValidationEvent | FinalizeEvent | MapEvent)


class StepFinding(TypedDict):
    """The open finding for a durable step's unit that did not end done (``durable.finish``)."""

    id: str  # "step-failed:<unit>"
    kind: Literal["step_failed"]
    step: str
    status: str
    attempts: int
    summary: str
