"""The snapshot file: a pretty-printed JSON view of the document plus a trailing marker.

The file is what `cat`, `jq` and the ulpi tools read: the document as ``JSON.stringify(doc, null,
2)`` would print it, with one extra last key, ``"_journal": {"seq", "offset", "crc"}``, that ties
the view to the journal. ``crc`` is the CRC-32 of every byte before the marker, so an edit by
another program (ulpi documents ``jq ... > tmp && mv tmp file``) is detected without
re-serialising anything: the bytes no longer match. A file without a marker is either a ulpi
document (no journal yet) or a file rewritten from scratch by another program.
"""

from __future__ import annotations

import zlib

from resumable.core import jsonio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any, Final, TypeGuard

    from resumable.core.types import RunDocument as Doc

    class Snapshot(Doc, total=False):
        _journal: object  # MARKER_KEY: the journal position the snapshot acknowledges

MARKER_KEY: Final = "_journal"
_MARKER_SEP = b',\n  "_journal": '


class Marker:
    __slots__ = ("offset", "seq")

    def __init__(self, seq: int, offset: int) -> None:
        self.seq = seq
        self.offset = offset


class Decoded:
    __slots__ = ("doc", "intact", "marker")

    def __init__(self, doc: Doc, marker: Marker | None, intact: bool) -> None:
        self.doc = doc
        self.marker = marker  # None: no marker at all
        self.intact = intact  # the bytes before the marker are the ones resumable wrote


def encode(doc: Doc, seq: int, offset: int, *, big: bool = False) -> bytes:
    return b"".join(stream(doc, seq, offset, big=big))


def stream(doc: Doc, seq: int, offset: int, *, big: bool = False) -> Iterator[bytes]:
    """The snapshot's bytes in pieces, the marker last (its CRC covers every piece before it), so
    that a writer never holds a large document's whole encoding, let alone copies of it."""
    crc = 0
    pending = b""
    for piece in _pretty_pieces(doc, big):
        if pending:
            crc = zlib.crc32(pending, crc)
            yield pending
        pending = piece
    # The document ends with "\n}"; the marker goes in as the last key.
    body = pending[:-2] if pending.endswith(b"\n}") else pending
    crc = zlib.crc32(body, crc)
    yield body + _MARKER_SEP + b'{"seq": %d, "offset": %d, "crc": "%08x"}' % (seq, offset, crc) + b"\n}\n"


# Units per piece when a large run's units are encoded apart (about a megabyte of JSON).
_UNITS_PER_PIECE = 1000
_PLACEHOLDER = "\x00resumable units\x00"  # a string no document holds: JSON escapes NUL


def _pretty_pieces(doc: Doc, big: bool) -> Iterator[bytes]:
    """``jsonio.dumps_pretty(doc)``, byte for byte, in pieces: a large run's units are encoded a
    thousand at a time into the place their object takes in the rest of the document."""
    units = doc.get("units")
    if not big or not isinstance(units, dict) or len(units) <= _UNITS_PER_PIECE:
        yield jsonio.dumps_pretty(doc, big=big)
        return
    shell = dict(doc)
    shell["units"] = _PLACEHOLDER
    head, found, tail = jsonio.dumps_pretty(shell, big=True).partition(jsonio.dumps(_PLACEHOLDER))
    if not found:  # cannot happen (a dict's keys are unique); never risk a wrong file
        yield jsonio.dumps_pretty(doc, big=True)
        return
    yield head
    batch: list[bytes] = []
    separator = b"{\n    "
    for key, unit in units.items():
        # A unit sits two levels deep: its own lines are indented four more spaces.
        text = jsonio.dumps_pretty(unit, big=True).replace(b"\n", b"\n    ")
        batch.append(separator + jsonio.dumps(key) + b": " + text)
        separator = b",\n    "
        if len(batch) == _UNITS_PER_PIECE:
            yield b"".join(batch)
            batch = []
    batch.append(b"\n  }")
    yield b"".join(batch)
    yield tail


def peek(data: bytes) -> Marker | None:
    """The marker of an intact snapshot, found without parsing the document; None when the
    marker is missing or the bytes before it are not the ones resumable wrote."""
    return _peek(data, 0, 0)


def _peek(data: bytes, before: int, crc: int) -> Marker | None:
    """peek() of a file's last bytes ``data``, after ``before`` bytes whose CRC-32 is ``crc``."""
    idx = data.rfind(_MARKER_SEP)
    if idx < 0 or before + idx <= 0:
        return None
    end = data.find(b"}", idx + len(_MARKER_SEP))
    try:
        raw = jsonio.loads(data[idx + len(_MARKER_SEP) : end + 1])
    except ValueError:
        return None
    if not (
        isinstance(raw, dict)
        and isinstance(raw.get("seq"), int)
        and isinstance(raw.get("offset"), int)
        and raw.get("crc") == f"{zlib.crc32(memoryview(data)[:idx], crc):08x}"
        and data[end + 1 :].strip() == b"}"
    ):
        return None
    return Marker(raw["seq"], raw["offset"])


def _is_snapshot(value: object) -> TypeGuard[Snapshot]:
    """A decoded snapshot is an object: the document resumable wrote, read null-safe whatever a
    hand edit left in it (``core.model.is_stored``), and the marker, taken out before it is used."""
    return isinstance(value, dict)


def decode(data: bytes) -> Decoded:
    """Parse snapshot bytes. Raises ``ValueError`` (not JSON, not an object); callers translate
    it."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise ValueError("file starts with a UTF-8 byte order mark")
    doc = jsonio.loads(data)
    if not _is_snapshot(doc):
        raise ValueError(f"top level is {type(doc).__name__}, not an object")
    raw = doc.pop(MARKER_KEY, None)
    if raw is None:
        return Decoded(doc, None, False)
    marker: Marker | None = None
    if (
        isinstance(raw, dict)
        and isinstance(raw.get("seq"), int)
        and isinstance(raw.get("offset"), int)
        and isinstance(raw.get("crc"), str)
    ):
        marker = Marker(raw["seq"], raw["offset"])
        # peek() also requires the marker to be the last key: `jq '.k = v'` appends k after it,
        # leaving the checksummed bytes alone, and that edit must not pass for intact.
        intact = peek(data) is not None
        return Decoded(doc, marker, intact)
    return Decoded(doc, None, False)


# --- large snapshots, a piece at a time ----------------------------------------------------------
# A whole-file parse of a 100,000-unit snapshot (85 MB) holds the file, the parser's own tree of
# it and the objects made from it at once (about 480 MB at the peak). So a large snapshot is read a
# few megabytes at a time and its units decoded a run of whole entries at a time, the rest of the
# document on its own. What this relies on is the format and any pretty-printer's one rule: the
# document's top-level "units" object is found by its tokens (not by where it sits or how it is
# indented), and its members start lines of one indentation, the one its first member's line has
# (learnt from the file: ``resumable``'s two spaces, ``jq``'s, ``json.dumps(indent=4)``'s or tabs),
# which no deeper member and no string can start (a raw newline never occurs inside a JSON
# string). Every run is checked by decoding it; a file that is not laid out so (one line of compact
# JSON) or any piece that does not decode is left to decode(): the answer is always decode()'s,
# marker and intactness included.

# Files from this size on are worth reading in pieces (below, decode() peaks at a few tens of MB).
CHUNKED_MIN = 8 << 20
_CHUNK = 2 << 20
_HEAD_MAX = 16 << 20  # the document before its units: a few hundred bytes in a run's snapshot
# A JSON string, or one of the structural characters (what finds the units object's brace).
_TOKENS = rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]'
_WS = b" \t\r\n"


# Values that repeat across a big run's units: stamps to the second, states, a fingerprint's
# environment digest and directory. Decoded, each would be its own string object (orjson makes a
# new one per occurrence): at 100,000 units, some 50 MB of copies. sys.intern keeps one of each
# (its table holds no reference of its own: a value goes when its last unit lets it go).
_SHARED_KEYS: Final = ("status", "createdAt", "updatedAt", "startedAt", "finishedAt")


def share_repeats(units: Mapping[str, Any]) -> None:
    """Make equal values of the usual repeating fields one string object, in place. Only a
    representation change: every value stays equal to what it was."""
    from sys import intern

    keys = _SHARED_KEYS
    for unit in units.values():
        if unit.__class__ is not dict:
            continue
        for key in keys:
            value = unit.get(key)
            if value.__class__ is str:
                unit[key] = intern(value)
        fingerprint = unit.get("fingerprint")
        if fingerprint.__class__ is dict:
            value = fingerprint.get("env")
            if value.__class__ is str:
                fingerprint["env"] = intern(value)
            value = fingerprint.get("cwd")
            if value.__class__ is str:
                fingerprint["cwd"] = intern(value)


def decode_chunked(read: Callable[[int, int], bytes], chunk: int = _CHUNK,
                   pick: Callable[[str, Any], Any] | None = None) -> tuple[Decoded, int] | None:
    """``decode()`` of the file ``read(offset, size)`` reads (fewer bytes only at its end), without
    ever holding the whole file or its whole parse: (the same Decoded, the file's size), or None
    when the file is not an intact snapshot in resumable's layout (decode() of its bytes answers,
    errors included). With ``pick``, each unit is replaced, as it is decoded, by what
    ``pick(unit id, unit)`` returns (dropped when that is None): a reader that needs a little of
    every unit holds only that."""
    try:
        return _decode_chunked(read, chunk, pick)
    except ValueError:
        return None  # decode() of the whole bytes raises its own error, or reads what this could not


def _take(units: dict[str, Any], part: dict[str, Any], pick: Callable[[str, Any], Any] | None) -> None:
    if pick is None:
        share_repeats(part)
        units.update(part)
        return
    for key, unit in part.items():
        kept = pick(key, unit)
        if kept is not None:
            units[key] = kept
        else:
            units.pop(key, None)  # a repeated key takes its last value


def _units_open(head: bytes) -> int | None:
    """The offset just past the "{" that opens the document's top-level "units" object, when
    ``head`` (the file's first bytes) reaches it."""
    import re  # only for a large snapshot: a low-level verb never reads one

    depth = 0
    prev = b""
    key = b""
    for match in re.finditer(_TOKENS, head):
        token = match.group()
        char = token[:1]
        if char == b'"':
            if depth == 1 and prev in (b"{", b","):
                key = token
            prev = b'"'
            continue
        if char in b"{[":
            if depth == 1 and prev == b":" and key == b'"units"' and char == b"{":
                return match.end()
            depth += 1
        elif char in b"}]":
            depth -= 1
            if depth <= 0:
                return None
        prev = token
    return None


def _units_again(final: bytes) -> bool:
    """Whether the document names "units" again at its top level after the units object, whose
    last members ``final`` starts with."""
    if b'"units"' not in final:
        return False  # the token compared below is these very bytes: no need to tokenise the rest
    import re

    depth = 2
    prev = b","
    for match in re.finditer(_TOKENS, final):
        token = match.group()
        char = token[:1]
        if char == b'"':
            if depth == 1 and prev == b"," and token == b'"units"':
                return True
            prev = b'"'
            continue
        if char in b"{[":
            depth += 1
        elif char in b"}]":
            depth -= 1
        prev = token
    return False


class _Pieces:
    """The file, read ``chunk`` bytes at a time."""

    __slots__ = ("chunk", "read", "size")

    def __init__(self, read: Callable[[int, int], bytes], chunk: int) -> None:
        self.read = read
        self.chunk = chunk
        self.size = 0

    def more(self) -> bytes:
        piece = self.read(self.size, self.chunk)
        self.size += len(piece)
        return piece


def _head(pieces: _Pieces) -> tuple[bytes, bytes, bytes] | None:
    """(the document up to its units' "{", the separator of the units' members, the bytes read
    past the head), or None when the file is not laid out one member a line."""
    buf = b""
    while True:
        piece = pieces.more()
        if not piece:
            return None
        buf += piece
        cut = _units_open(buf)
        if cut is not None:
            rest = buf[cut:]
            indent = rest[: len(rest) - len(rest.lstrip(_WS))]
            if indent == rest:
                if len(buf) > _HEAD_MAX:
                    return None
                continue  # the first member's line is not read yet
            break
        if len(buf) > _HEAD_MAX:
            return None
    head = buf[:cut]
    if b"\n" not in indent or rest[len(indent) : len(indent) + 1] != b'"':
        return None  # not one member a line (or no members): decode() reads it whole
    # The brace must open the value of the document's own "units" key: then the head closed by
    # two braces is a document whose last key is "units".
    outline = jsonio.loads(head + b"}}")
    if not isinstance(outline, dict) or list(outline)[-1] != "units" or outline["units"] != {}:
        return None
    return head, b"," + indent + b'"', rest


def _decode_chunked(read: Callable[[int, int], bytes], chunk: int,
                    pick: Callable[[str, Any], Any] | None) -> tuple[Decoded, int] | None:
    pieces = _Pieces(read, chunk)
    found = _head(pieces)
    if found is None:
        return None
    head, entry, rest = found
    crc = zlib.crc32(head)
    # The units, a run of whole members at a time, into one dict in the file's order (a repeated
    # key keeps its first place and takes its last value, as in a whole parse). A run is decoded
    # as "[{" run "}]", as deep as it lies in the document, in place in the buffer: its last
    # comma becomes the closing brace. A run that does not decode reaches past the units' end.
    units: dict[str, Any] = {}
    runs = bytearray(b"[{")
    runs += rest
    del rest
    piece = b"-"
    while piece:
        piece = pieces.more()
        runs += piece
        split = runs.rfind(entry, 2)
        if not piece or split < 0:
            continue
        after = runs[split + 1 :]
        del runs[split + 1 :]
        runs[split] = ord("}")
        runs.append(ord("]"))
        part = _run(runs)
        if part is None:
            del runs[split:]  # as it was: the units' end is in this run
            runs += b","
            runs += after
            break
        _take(units, part, pick)
        del part
        runs[split] = ord(",")
        crc = zlib.crc32(memoryview(runs)[2 : split + 1], crc)
        runs = bytearray(b"[{")
        runs += after
    return _last(head, bytes(runs[2:]), pieces, units, pick, crc)


def _run(runs: bytearray) -> dict[str, Any] | None:
    try:
        part = jsonio.loads(runs)
    except ValueError:
        return None
    if isinstance(part, list) and len(part) == 1 and isinstance(part[0], dict):
        return part[0]
    return None


def _last(head: bytes, final: bytes, pieces: _Pieces, units: dict[str, Any],
          pick: Callable[[str, Any], Any] | None, crc: int) -> tuple[Decoded, int] | None:
    """The units' last members and the rest of the document, decoded as one document after the
    head (small in a run's snapshot), the marker taken as decode() takes it."""
    before = pieces.size - len(final)
    parts = [final]
    while piece := pieces.more():
        parts.append(piece)
    final = b"".join(parts)
    del parts
    if _units_again(final):
        return None  # a second top-level "units": decode() takes the last, as JSON.parse does
    doc = jsonio.loads(head + final)
    if not _is_snapshot(doc) or not isinstance(doc.get("units"), dict):
        return None
    last = doc["units"]
    _take(units, last, pick)
    doc["units"] = units  # its place in the document's order stays the one the file gave it
    raw = doc.pop(MARKER_KEY, None)
    if not (isinstance(raw, dict) and isinstance(raw.get("seq"), int) and isinstance(raw.get("offset"), int)
            and isinstance(raw.get("crc"), str)):
        return Decoded(doc, None, False), pieces.size
    # Intact as peek() finds it: the marker last, its CRC over every byte before it.
    intact = _peek(final, before, crc) is not None
    return Decoded(doc, Marker(raw["seq"], raw["offset"]), intact), pieces.size
