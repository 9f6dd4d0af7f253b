"""The live workflow overlay: the newest Claude Code workflow journal of the current project.

This is the optional overlay of ulpi's run-status.mjs (``readWorkflowStatus``, its "Live overlay"). The
durable run document stays authoritative; the overlay only adds what live agents are doing, and any
surprise in the foreign format (drift, a damaged line, an unreadable directory) yields no overlay at
all (``None``), never a guess and never a fallback to an older journal.

Where run-status.mjs is loose we are stricter, never looser: below the project directory nothing is
followed through a symlink (a planted link cannot point the reader at another file), a FIFO is never
opened, and ``agent-*.jsonl`` transcripts are never opened because only ``journal.jsonl`` is.

Rendering helpers at the bottom are pure: lines of ``(text, style)`` segments, as ``view`` uses.
"""

from __future__ import annotations

import math
import os
import re
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict, TypeGuard

from resumable.core import jsonio

if TYPE_CHECKING:
    from resumable.core.types import ResumeSet

WORKFLOW_STALE_SECONDS: Final = 30 * 60.0
NO_OVERLAY_HINT: Final = (
    "no live workflow transcript found — use /workflows for runtime details; "
    "durable status remains authoritative"
)
RUNNING_SHOWN: Final = 6
JSON_KEY: Final = "liveWorkflow"  # the extra key `status --json` carries the overlay under

_WF_NAME: Final = re.compile(r"wf_[A-Za-z0-9-]+")
_SLUG_KEEP: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_STARTED_KEYS: Final = frozenset(("type", "key", "agentId"))
_RESULT_KEYS: Final = frozenset(("type", "key", "agentId", "result"))

Seg = tuple[str, str]
Line = list[Seg]


class WorkflowJson(TypedDict):
    """The live workflow as ``status --json`` carries it (under ``JSON_KEY``)."""

    wf: str
    spawned: int
    done: int
    running: list[str]
    mtime: str
    stale: bool
    divergence: NotRequired[list[str]]  # why the live view and the durable one disagree (empty: they agree)


@dataclass(frozen=True)
class WorkflowStatus:
    """run-status.mjs's ``{wf, spawned, done, running, mtime, stale}``, plus what divergence needs."""

    wf: str
    spawned: int
    done: int
    running: tuple[str, ...]
    mtime: str  # ISO-8601 with milliseconds, as JavaScript's Date.toISOString prints it
    stale: bool
    mtime_seconds: float
    journal: str
    running_keys: tuple[str, ...]  # the key each running agent was started under, same order
    started_keys: frozenset[str]

    def to_json(self) -> WorkflowJson:
        return {"wf": self.wf, "spawned": self.spawned, "done": self.done,
                "running": list(self.running), "mtime": self.mtime, "stale": self.stale}


# ---- locating the journal --------------------------------------------------------------------------

def resolve_claude_dir(explicit: str | os.PathLike[str] | None = None) -> str:
    """``explicit``, else ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``; an empty value counts as unset
    (run-status.mjs chains them with ``||``). HOME is read now, not at import."""
    if explicit:
        return os.fspath(explicit)
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    if env:
        return env
    home = os.environ.get("HOME")
    if not home:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    return os.path.join(home, ".claude")


def project_slug(cwd: str | os.PathLike[str]) -> str:
    """The resolved cwd (lexically, as Node's path.resolve: symlinks are not resolved) with every
    character outside [A-Za-z0-9-] replaced by '-'. run-status.mjs's regex works on UTF-16 code units, so
    a character outside the BMP becomes two dashes."""
    resolved = os.path.abspath(os.fspath(cwd))
    return "".join(c if c in _SLUG_KEEP else ("--" if ord(c) > 0xFFFF else "-") for c in resolved)


def project_root_for_runs_dir(runs_dir: str | os.PathLike[str], cwd: str | None = None) -> str:
    """The project a runs directory belongs to: the parent of ``.ulpi``/``.resumable`` when the
    directory is ``<root>/.ulpi/runs`` or ``<root>/.resumable/runs``, else ``cwd`` (run-status.mjs's rule,
    extended to our own layout)."""
    d = os.path.abspath(os.fspath(runs_dir))
    parent = os.path.dirname(d)
    if os.path.basename(d) == "runs" and os.path.basename(parent) in (".ulpi", ".resumable"):
        return os.path.dirname(parent)
    return cwd if cwd is not None else os.getcwd()


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _node_mtime_ms(st: os.stat_result) -> float:
    # Node's Stats.mtimeMs, computed the same way, so ties are ties exactly when they are in run-status.mjs.
    return (st.st_mtime_ns // 1_000_000_000) * 1e3 + (st.st_mtime_ns % 1_000_000_000) / 1e6


# ICU's root collation, which run-status.mjs's localeCompare uses, orders ASCII as: whitespace,
# punctuation in this order, digits, then letters case-insensitively with lowercase first.
_PRIMARY_ORDER: Final = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_PRIMARY: Final = {c: i for i, c in enumerate(_PRIMARY_ORDER)}


def locale_key(s: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A sort key approximating ``String.prototype.localeCompare`` (ICU root) for the names a journal
    path holds: exact for ASCII; other characters sort after letters by code point."""
    primary = tuple(_PRIMARY.get(c.lower(), 1000 + ord(c)) if c.isascii() else 1000 + ord(c) for c in s)
    tertiary = tuple(1 if c.isascii() and c.isupper() else 0 for c in s)
    return primary, tertiary


def newest_journal(project_dir: str) -> tuple[str, os.stat_result] | None:
    """The newest ``<session>/subagents/workflows/wf_*/journal.jsonl`` by mtime, ties by path
    descending. Regular files only, found without following a symlink; nothing else is opened."""
    candidates: list[tuple[float, str, os.stat_result]] = []
    with os.scandir(project_dir) as sessions:
        for session in sessions:
            if not session.is_dir(follow_symlinks=False):
                continue
            workflows = os.path.join(project_dir, session.name, "subagents", "workflows")
            if not (_is_real_dir(os.path.dirname(workflows)) and _is_real_dir(workflows)):
                continue
            with os.scandir(workflows) as wfs:
                for wf in wfs:
                    if not wf.is_dir(follow_symlinks=False) or not _WF_NAME.fullmatch(wf.name):
                        continue
                    file = os.path.join(workflows, wf.name, "journal.jsonl")
                    try:
                        st = os.lstat(file)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        candidates.append((_node_mtime_ms(st), file, st))
    if not candidates:
        return None
    best = max(candidates, key=lambda c: (c[0], locale_key(c[1])))
    return best[1], best[2]


def _read_regular(path: str, expect: os.stat_result) -> str:
    # O_NONBLOCK: if the path was swapped for a FIFO since lstat, opening must not hang.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (expect.st_dev, expect.st_ino):
            raise OSError(f"{path} changed while being read")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    # Node decodes 'utf8' with U+FFFD for invalid bytes; so do we.
    return b"".join(chunks).decode("utf-8", "replace")


# ---- parsing ---------------------------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse refuses NaN/Infinity; Python would accept


def _json_parse(line: str) -> Any:
    return jsonio.stdlib_loads(line, parse_constant=_reject_constant)


class JournalEntry(TypedDict):
    """A line of a workflow's journal: an agent ``started`` for ``key``, or its ``result``; exactly these
    keys (``_STARTED_KEYS``, ``_RESULT_KEYS``), or the journal has drifted from the format read here."""

    type: str
    key: str
    agentId: str
    result: NotRequired[object]  # a result's: the agent's own


def _valid_entry(entry: object) -> TypeGuard[JournalEntry]:
    if not isinstance(entry, dict):
        return False
    kind = entry.get("type")
    if kind == "started":
        wanted = _STARTED_KEYS
    elif kind == "result":
        wanted = _RESULT_KEYS
    else:
        return False
    key, agent = entry.get("key"), entry.get("agentId")
    return entry.keys() == wanted and isinstance(key, str) and key != "" and isinstance(agent, str) \
        and agent != ""


def parse_journal(text: str) -> list[JournalEntry] | None:
    """Every entry, or None on any drift. Only a final line without a newline that does not parse as
    JSON may be dropped (a write cut short); a final line that parses must be a valid entry."""
    ended = text.endswith("\n")
    lines = text.split("\n")
    if ended:
        lines.pop()
    entries: list[JournalEntry] = []
    for index, line in enumerate(lines):
        if not line:
            return None
        try:
            entry = _json_parse(line)
        except (ValueError, RecursionError):
            if not ended and index == len(lines) - 1:
                break
            return None
        if not _valid_entry(entry):
            return None
        entries.append(entry)
    return entries


def _iso_ms(mtime_ms: float) -> str:
    ms = math.trunc(mtime_ms)  # Date's TimeClip truncates toward zero
    dt = datetime.fromtimestamp(ms // 1000, UTC)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def read_workflow_status(
    cwd: str | os.PathLike[str],
    *,
    claude_dir: str | os.PathLike[str] | None = None,
    stale_after: float | None = None,
    now: float | None = None,
) -> WorkflowStatus | None:
    """run-status.mjs's ``readWorkflowStatus`` with times in seconds: any exception gives None.

    ``stale`` is ``now - mtime > stale_after`` (30 minutes by default), and also true when ``now``
    or ``stale_after`` is not finite."""
    try:
        project_dir = os.path.join(resolve_claude_dir(claude_dir), "projects", project_slug(cwd))
        if not os.path.isdir(project_dir):
            return None
        newest = newest_journal(project_dir)
        if newest is None:
            return None
        path, st = newest
        entries = parse_journal(_read_regular(path, st))
        if not entries:
            return None
        return _summarise(entries, path, st, stale_after, now)
    except Exception:
        return None


def _summarise(entries: Sequence[JournalEntry], path: str, st: os.stat_result,
               stale_after: float | None, now: float | None) -> WorkflowStatus:
    completed = {e["agentId"] for e in entries if e["type"] == "result"}
    first_key: dict[str, str] = {}
    spawned = 0
    for e in entries:
        if e["type"] == "started":
            spawned += 1
            first_key.setdefault(e["agentId"], e["key"])
    running = [a for a in first_key if a not in completed]
    mtime_ms = _node_mtime_ms(st)
    limit = WORKFLOW_STALE_SECONDS if stale_after is None else stale_after
    clock = time.time() if now is None else now
    stale = True if not (math.isfinite(clock) and math.isfinite(limit)) else clock - mtime_ms / 1e3 > limit
    return WorkflowStatus(
        wf=os.path.basename(os.path.dirname(path)),
        spawned=spawned,
        done=len(entries) - spawned,
        running=tuple(running),
        mtime=_iso_ms(mtime_ms),
        stale=stale,
        mtime_seconds=mtime_ms / 1e3,
        journal=path,
        running_keys=tuple(first_key[a] for a in running),
        started_keys=frozenset(first_key.values()),
    )


# ---- rendering (pure) ------------------------------------------------------------------------------

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _safe(text: str) -> str:
    """Agent ids and keys come from a foreign file: never let them drive the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def js_relative_time(then: float, now: float) -> str:
    """run-status.mjs's relative time (its ``rel``), rounding as JavaScript's Math.round."""
    s = max(0, math.floor((now - then) + 0.5))
    if s < 60:
        return f"{s}s ago"
    m = math.floor(s / 60 + 0.5)
    if m < 60:
        return f"{m}m ago"
    h = m // 60
    if h < 48:
        return f"{h}h {m % 60}m ago"
    return f"{math.floor(h / 24 + 0.5)}d ago"


def _units(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    units = doc.get("units")
    return units if isinstance(units, dict) else {}


def _status(unit: object) -> object:
    return unit.get("status") if isinstance(unit, dict) else None


def _some(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:RUNNING_SHOWN])
    return shown + (f", … (+{len(ids) - RUNNING_SHOWN} more)" if len(ids) > RUNNING_SHOWN else "")


def divergence(live: WorkflowStatus, doc: Mapping[str, Any]) -> list[str]:
    """Where the live agents and the durable units disagree, one phrase per fact (empty: they agree).

    1. More agents started than units are durably done (run-status.mjs's warning): work finished live
       that the checkpoint has not recorded, or agents that were retried.
    2. An agent still running under a key that names a unit already done: work repeated, or a
       done record written too early.
    3. A unit durably ``in_progress`` with no running agent under its key, judged only when the
       journal's keys name units of this run at all (otherwise keys and unit ids are unrelated
       vocabularies and nothing can be concluded): a lost agent, or a crash before its result.
    """
    units = _units(doc)
    done_ids = {uid for uid, u in units.items() if _status(u) == "done"}
    out: list[str] = []
    gap = live.spawned - len(done_ids)
    if gap > 0:
        out.append(f"{gap} more agent start(s) than durable done unit(s)")
    rerun = sorted({k for k in live.running_keys if k in done_ids})
    if rerun:
        out.append(f"agent running for done unit(s): {_some(rerun)}")
    if any(k in units for k in live.started_keys):
        running = set(live.running_keys)
        orphans = [uid for uid, u in units.items() if _status(u) == "in_progress" and uid not in running]
        if orphans:
            out.append(f"in_progress unit(s) with no running agent: {_some(orphans)}")
    return out


def claude_launched(doc: Mapping[str, Any]) -> bool:
    """Whether the run's launch descriptor is a Claude Code workflow's (a ``Workflow()`` script: the
    run-status.mjs's ``legacy-workflow`` kind), for which "no live workflow" is news, as run-status.mjs says it."""
    from resumable.core.recipe import classify

    no_set: ResumeSet = {"skip": [], "eligible": [], "dep_blocked": {}}  # only the kind is asked
    return bool(classify(doc, "", rs=no_set)["kind"] == "legacy-workflow")


def overlay_lines(live: WorkflowStatus | None, doc: Mapping[str, Any], now: float) -> list[Line]:
    """The status view's overlay: run-status.mjs's ``Live workflow`` line and its ``divergence`` line
    (always shown with the counts, as run-status.mjs does; the reasons are appended when they disagree),
    or run-status.mjs's hint when there is no live journal."""
    label = ("Live workflow  ", "dim")
    if live is None:
        return [[label, (NO_OVERLAY_HINT, "dim")]]
    head: Line = [label, (_safe(live.wf), "cyan"), (f" · {live.done} done · {len(live.running)} running", "")]
    if live.running:
        shown = ", ".join(_safe(a) for a in live.running[:RUNNING_SHOWN])
        more = ", …" if len(live.running) > RUNNING_SHOWN else ""
        head.append((f" ({shown}{more})", "dim"))
    age = js_relative_time(live.mtime_seconds, now)
    head.append((f" · stale ({age})", "yellow") if live.stale else (f" · updated {age}", "dim"))
    units = _units(doc)
    n_done = sum(1 for u in units.values() if _status(u) == "done")
    div: Line = [("divergence     ", "dim"),
                 (f"live agents {live.spawned} vs durable units {n_done}/{len(units)}", "")]
    div.extend((f" · {_safe(reason)}", "yellow") for reason in divergence(live, doc))
    return [head, div]


def overlay_json(live: WorkflowStatus | None, doc: Mapping[str, Any]) -> WorkflowJson | None:
    """The value of the extra ``--json`` key: run-status.mjs's object plus ``divergence`` (a list of
    phrases, empty when they agree), or None when there is no live journal."""
    if live is None:
        return None
    out = live.to_json()
    out["divergence"] = divergence(live, doc)
    return out
