"""Reading ulpi's opt-in hash-chained event log (``<id>.events.jsonl``); never writing it.

ulpi's checkpoint store may keep, next to a snapshot ``<id>.json``, a JSON Lines log whose first line
is ``{"v":1,"op":"init","doc":{…},"afterHash":H}`` and each later line one transition
``{"v":1,"op":"set|merge|delete","path":[…],"value"?:…,"beforeHash":H0,"afterHash":H1}``. Every hash
is the sha256 of ``JSON.stringify(doc)``. A crash between the fsynced append and the snapshot
rename leaves the log ahead of the snapshot; this module replays it by ulpi's rules so that the
store can adopt the replayed document:

- only a final fragment without a newline is a write in flight and is dropped;
- any complete line that is not valid JSON, has a bad envelope, repeats init, breaks the chain or
  breaks a rule of ``applyEvent`` fails closed with a one-line ``CorruptRunError`` naming the file
  and the line; nothing is guessed and nothing is repaired.

Hashes only match if the document is serialised exactly as JavaScript does, so this module carries
a faithful ``JSON.stringify``: compact, object keys in JavaScript's order (array-index keys first,
ascending, then insertion order), numbers as ``Number.prototype.toString`` prints them, strings
with JSON.stringify's escapes (lone surrogates as ``\\udxxx``). Parsing mirrors ``JSON.parse``:
NaN/Infinity literals are refused, a number too large for a double becomes null (what a JavaScript
writer would have stored).
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict, TypeGuard

from resumable.core import jsonio
from resumable.errors import CorruptRunError, StoreError

OPS: Final = ("set", "merge", "delete")
FORBIDDEN_KEYS: Final = frozenset(("__proto__", "prototype", "constructor"))
_SAFE_INT: Final = 2**53
_INDEX_KEY: Final = re.compile(r"0|[1-9][0-9]{0,9}")
_SURROGATE: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def event_log_path(snapshot: str | os.PathLike[str]) -> str:
    """``x.json`` -> ``x.events.jsonl``; any other name gets ``.events.jsonl`` appended."""
    name = os.fspath(snapshot)
    if not name.strip():
        raise StoreError("snapshotFile must be a nonempty string")
    return name[:-5] + ".events.jsonl" if name.endswith(".json") else name + ".events.jsonl"


# ---- JavaScript's JSON -----------------------------------------------------------------------------

def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None  # JSON.parse gives ±Infinity; stringify: null


def _parse_int(text: str) -> int | None:
    if len(text) > 20 and not math.isfinite(float(text)):
        return None
    return int(text)


def parse_json(text: str) -> Any:
    """``JSON.parse``: raises ValueError (or RecursionError) where JavaScript throws."""
    return jsonio.stdlib_loads(text, parse_constant=_refuse_constant, parse_float=_parse_float,
                               parse_int=_parse_int)


def js_number(x: float) -> str:
    """``Number.prototype.toString()`` for a double: shortest round-trip digits (Python's repr finds
    the same ones), laid out by ECMAScript's Number::toString rules."""
    if not math.isfinite(x):
        return "null"  # what JSON.stringify prints for NaN and ±Infinity
    if x == 0:
        return "0"  # -0 too
    if x < 0:
        return "-" + js_number(-x)
    mantissa, _, exp = repr(x).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)  # value = 0.DIGITS × 10^n
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    head = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(e)}"


def _surrogate(match: re.Match[str]) -> str:
    s = match[0]
    if len(s) == 2:  # a pair held as two code points is one character to JavaScript
        return chr(0x10000 + ((ord(s[0]) - 0xD800) << 10) + (ord(s[1]) - 0xDC00))
    return f"\\u{ord(s):04x}"


_quote: Callable[[str], str] = jsonio.string_literal  # JSON.stringify's escapes, bar lone surrogates
_DIGITS: Final = frozenset("0123456789")


def _ordered_keys(obj: Mapping[str, Any]) -> list[str]:
    """JavaScript's own-property order: array-index keys ascending, then the rest as inserted."""
    index = sorted((k for k in obj if _INDEX_KEY.fullmatch(k) and int(k) < 2**32 - 1), key=int)
    chosen = set(index)
    return index + [k for k in obj if k not in chosen]


def _encode(value: Any) -> str:
    kind = type(value)  # exact types: documents come from JSON; anything else takes the slow branches
    if kind is str:
        return _quote(value)
    if kind is dict:
        keys: Any = value
        for key in value:
            if key[:1] in _DIGITS:  # rare: only then can JavaScript's order differ from insertion
                keys = _ordered_keys(value)
                break
        return "{" + ",".join([_quote(k) + ":" + _encode(value[k]) for k in keys]) + "}"
    if kind is list:
        return "[" + ",".join([_encode(v) for v in value]) + "]"
    if kind is int:
        return str(value) if -_SAFE_INT < value < _SAFE_INT else _big_int(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return js_number(value)
    # A subclass (an IntEnum, an OrderedDict) is encoded as its base type.
    if isinstance(value, str):
        return _quote(str(value))
    if isinstance(value, int):
        return _encode(int(value))
    if isinstance(value, dict):
        return _encode(dict(value))
    if isinstance(value, list | tuple):
        return _encode(list(value))
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _big_int(value: int) -> str:
    try:
        return js_number(float(value))  # JavaScript holds it as the nearest double
    except OverflowError:
        return "null"


def stringify(value: Any) -> str:
    """``JSON.stringify(value)``: compact, byte for byte as Node prints it."""
    text = _encode(value)
    return _SURROGATE.sub(_surrogate, text) if _SURROGATE.search(text) else text


def digest(doc: Any) -> str:
    """ulpi's ``digest``: sha256 hex of ``JSON.stringify(doc)`` in UTF-8."""
    text = _encode(doc)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escape it as JSON.stringify does (rare, so late)
        data = _SURROGATE.sub(_surrogate, text).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


# ---- applyEvent ------------------------------------------------------------------------------------

class TransitionError(ValueError):
    """A transition breaks a rule of ulpi's ``applyEvent`` (ulpi's EventLogError)."""


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


class Transition(TypedDict):
    """One record of a ulpi event log: ``op`` at ``path`` of the document (``init`` carries the whole
    ``doc``), chained by the document's hash before and after. Read back, only the envelope (``v``
    1, a string ``op``: ``is_transition``) is vouched for; ``apply_event`` checks the rest."""

    v: Literal[1]
    op: str  # "init", or one of OPS
    path: NotRequired[object]  # a nonempty list of safe string keys
    value: NotRequired[Any]  # what is set or merged there: the document's own data
    doc: NotRequired[object]  # init's document
    beforeHash: NotRequired[str]
    afterHash: NotRequired[str]


def is_transition(event: object) -> TypeGuard[Transition]:
    v = event.get("v") if isinstance(event, dict) else None
    return isinstance(event, dict) and not isinstance(v, bool) and v == 1 and isinstance(event.get("op"), str)


def _apply_in_place(doc: dict[str, object], event: Mapping[str, Any]) -> None:
    op = event.get("op")
    if op not in OPS:
        shown = op if isinstance(op, str) else "undefined" if "op" not in event else stringify(op)
        raise TransitionError(f"unsupported transition op '{shown}'")
    path = event.get("path")
    if not isinstance(path, list) or not path or any(
        not isinstance(p, str) or p == "" or p in FORBIDDEN_KEYS for p in path
    ):
        raise TransitionError("transition.path must be a nonempty array of safe string keys")
    parent = doc
    for key in path[:-1]:
        child = parent.get(key)
        if not isinstance(child, dict):
            child = {}
            parent[key] = child
        parent = child
    leaf = path[-1]
    if op == "delete":
        parent.pop(leaf, None)
    elif op == "set":
        if "value" not in event:
            raise TransitionError("set transition requires value")
        parent[leaf] = _clone(event["value"])
    else:
        value = event.get("value")
        if not isinstance(value, dict):
            raise TransitionError("merge transition requires an object value")
        prior = parent.get(leaf)
        parent[leaf] = {**(prior if isinstance(prior, dict) else {}), **_clone(value)}


def apply_event(doc: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, object]:
    """ulpi's pure ``applyEvent``: a new document; ``doc`` and ``event`` are left untouched."""
    if not isinstance(doc, dict) or not isinstance(event, dict):
        raise TransitionError("document and event must be JSON objects")
    out: dict[str, object] = _clone(doc)
    _apply_in_place(out, event)
    return out


def apply_events(doc: Mapping[str, Any], events: Sequence[Transition]) -> dict[str, object]:
    """``applyEvent`` for each of ``events`` in turn (already verified records of a log), cloning
    ``doc`` once rather than once per event."""
    if not isinstance(doc, dict):
        raise TransitionError("document and event must be JSON objects")
    out: dict[str, object] = _clone(doc)
    for event in events:
        _apply_in_place(out, event)
    return out


# ---- reading the log -------------------------------------------------------------------------------

def _open_regular(path: str, what: str) -> int:
    """A descriptor on a regular file, opened without following a symlink or blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise StoreError(f"{what} does not exist: {path}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"refusing to read {path}: it is a symlink") from exc
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"refusing to read {path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_regular(path: str, what: str) -> bytes:
    fd = _open_regular(path, what)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _record(line: str, where: str, log: str) -> Transition:
    try:
        event = parse_json(line)
    except (ValueError, RecursionError) as exc:
        raise CorruptRunError(f"event log {log} {where} is corrupt: {exc}") from exc
    if not is_transition(event):
        raise CorruptRunError(f"event log {log} {where} has an invalid envelope")
    return event


@dataclass(frozen=True)
class Replayed:
    """The replayed document, how many complete records made it, how many bytes of a torn final
    fragment were left out, and the afterHash of every record (the chain, oldest first)."""

    doc: dict[str, object]
    events: int
    discarded_tail_bytes: int
    after_hashes: tuple[str, ...]
    # The transition records themselves (records[i] is line i + 2), kept only when asked for.
    records: tuple[Transition, ...] = ()

    @property
    def last_hash(self) -> str:
        return self.after_hashes[-1]


def replay(snapshot: str | os.PathLike[str], *, keep_records: bool = False) -> Replayed:
    """ulpi's ``replayEventLog``: the document the log of ``snapshot`` describes, verified.
    ``keep_records`` also returns the transition records (to apply some of them elsewhere)."""
    log = event_log_path(snapshot)
    raw = _read_regular(log, "event log")
    keep = raw.rfind(b"\n") + 1
    # 0x0A is never inside a UTF-8 sequence, so decoding the complete part alone is what Node does.
    lines = raw[:keep].decode("utf-8", "replace").split("\n")
    lines.pop()
    if not lines:
        raise CorruptRunError(f"event log {log} has no complete init record")
    first = _record(lines[0], "line 1", log)
    doc = first.get("doc")
    if first["op"] != "init" or not isinstance(doc, dict):
        raise CorruptRunError(f"event log {log} must start with one init document (line 1)")
    current = digest(doc)
    if first.get("afterHash") != current:
        raise CorruptRunError(f"event log {log} line 1: init hash does not match its document")
    hashes = [current]
    kept: list[Transition] = []
    for index in range(1, len(lines)):
        number = index + 1
        event = _record(lines[index], f"line {number}", log)
        if event["op"] == "init":
            raise CorruptRunError(f"event log {log} line {number} repeats init")
        if event.get("beforeHash") != current:
            raise CorruptRunError(f"event log {log} line {number} breaks the beforeHash chain")
        try:
            # Each record is parsed afresh, so nothing in the event is shared: apply in place.
            _apply_in_place(doc, event)
        except TransitionError as exc:
            raise CorruptRunError(f"event log {log} line {number}: {exc}") from exc
        current = digest(doc)
        if event.get("afterHash") != current:
            raise CorruptRunError(f"event log {log} line {number} breaks the afterHash chain")
        hashes.append(current)
        if keep_records:
            kept.append(event)
    return Replayed(doc=doc, events=len(lines), discarded_tail_bytes=len(raw) - keep,
                    after_hashes=tuple(hashes), records=tuple(kept))


def _tail_line(log: str) -> bytes:
    """The last complete line of ``log``, read backwards from its end in blocks."""
    fd = _open_regular(log, "event log")
    try:
        pos, buf = os.fstat(fd).st_size, b""
        while True:
            end = buf.rfind(b"\n")
            start = buf.rfind(b"\n", 0, end) if end > 0 else -1
            if (end >= 0 and start >= 0) or pos == 0:
                break
            take = min(pos, 64 * 1024)
            pos -= take
            buf = os.pread(fd, take, pos) + buf
    except OSError as exc:
        raise StoreError(f"cannot read {log}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if end < 0:
        raise CorruptRunError(f"event log {log} has no complete init record")
    return buf[start + 1:end]


def last_after_hash(snapshot: str | os.PathLike[str]) -> object:
    """The ``afterHash`` of the log's last complete record, read from the end of the file (cheap
    whatever the log's length; the chain is NOT verified, exactly as on ulpi's append path)."""
    log = event_log_path(snapshot)
    return _record(_tail_line(log).decode("utf-8", "replace"), "last line", log).get("afterHash")


def digest_matches(doc: object, snapshot: str | os.PathLike[str]) -> bool:
    """ulpi's in-sync test: the snapshot document's digest equals the last afterHash. When it
    does not, ulpi replays the log (crash recovery)."""
    return isinstance(doc, dict) and digest(doc) == last_after_hash(snapshot)


LogKind = Literal["no_log", "in_sync", "log_ahead", "diverged", "snapshot_unreadable"]


@dataclass(frozen=True)
class LogState:
    """How a ulpi event log stands against its snapshot.

    - ``no_log``: there is no event log; nothing to adopt.
    - ``in_sync``: the snapshot is the log's last state (ulpi's cheap digest test).
    - ``log_ahead``: the snapshot is an earlier state of the chain; ``ahead_by`` records of the log
      are missing from it (the crash window). Adopt ``replayed.doc``.
    - ``snapshot_unreadable``: no snapshot document to compare (missing, unparseable, not an
      object); ulpi rebuilds it from the log, so adopting ``replayed.doc`` is what it would do.
    - ``diverged``: the snapshot matches no state of the log: something other than the log wrote it
      (ulpi's own store, a hand edit). ulpi would replay and lose those writes (a bug of
      its); the caller should keep the snapshot and say so rather than adopt.
    """

    kind: LogKind
    replayed: Replayed | None = None
    ahead_by: int = 0


_UNSET: Any = object()


def compare(snapshot: str | os.PathLike[str], snapshot_doc: object = _UNSET) -> LogState:
    """Classify the log of ``snapshot`` against the snapshot's document (read from disk unless
    given). In sync costs one tail read and one digest; otherwise the whole log is replayed and
    verified (a corrupt record raises ``CorruptRunError``)."""
    log = event_log_path(snapshot)
    if not os.path.lexists(log):
        return LogState("no_log")
    if snapshot_doc is _UNSET:
        snapshot_doc = _read_snapshot(os.fspath(snapshot))
    mine = digest(snapshot_doc) if isinstance(snapshot_doc, dict) else None
    if mine is not None and mine == last_after_hash(snapshot):
        return LogState("in_sync")
    replayed = replay(snapshot)
    if mine is None:
        return LogState("snapshot_unreadable", replayed, replayed.events)
    if mine == replayed.last_hash:  # the log changed between the two reads
        return LogState("in_sync", replayed)
    hashes = replayed.after_hashes
    for position in range(len(hashes) - 2, -1, -1):
        if hashes[position] == mine:
            return LogState("log_ahead", replayed, len(hashes) - 1 - position)
    return LogState("diverged", replayed)


def _read_snapshot(path: str) -> object:
    if not os.path.lexists(path):
        return None
    raw = _read_regular(path, "snapshot")
    try:
        return parse_json(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
