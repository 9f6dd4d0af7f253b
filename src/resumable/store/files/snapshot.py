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
    from collections.abc import Callable, Iterator
    from typing import Any, Final

MARKER_KEY = "_journal"
_MARKER_SEP = b',\n  "_journal": '


class Marker:
    __slots__ = ("offset", "seq")

    def __init__(self, seq: int, offset: int) -> None:
        self.seq = seq
        self.offset = offset


class Decoded:
    __slots__ = ("doc", "intact", "marker")

    def __init__(self, doc: dict[str, Any], marker: Marker | None, intact: bool) -> None:
        self.doc = doc
        self.marker = marker  # None: no marker at all
        self.intact = intact  # the bytes before the marker are the ones resumable wrote


def encode(doc: dict[str, Any], seq: int, offset: int, *, big: bool = False) -> bytes:
    return b"".join(stream(doc, seq, offset, big=big))


def stream(doc: dict[str, Any], seq: int, offset: int, *, big: bool = False) -> Iterator[bytes]:
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


def _pretty_pieces(doc: dict[str, Any], big: bool) -> Iterator[bytes]:
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


def decode(data: bytes) -> Decoded:
    """Parse snapshot bytes. Raises ``ValueError`` (not JSON, not an object); callers translate
    it."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise ValueError("file starts with a UTF-8 byte order mark")
    doc = jsonio.loads(data)
    if not isinstance(doc, dict):
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
# it and the objects made from it at once (about 480 MB at the peak). A snapshot resumable wrote
# has the layout of dumps_pretty, in which the units object's entries start at "\n    \"" and it
# ends at "\n  }" (a raw newline never occurs inside a JSON string): such a file is read a few
# megabytes at a time, its units decoded an entry run at a time and the rest of the document on
# its own. Anything else, and any file whose marker does not vouch for its bytes, is left to
# decode(): the answer is always decode()'s.

# Files from this size on are worth reading in pieces (below, decode() peaks at a few tens of MB).
CHUNKED_MIN = 8 << 20
_CHUNK = 2 << 20
_HEAD_MAX = 16 << 20  # the document before its units: a few hundred bytes in a run's snapshot
_UNITS_OPEN = b'\n  "units": {\n    "'
_ENTRY = b',\n    "'
_UNITS_CLOSE = b"\n  }"


# Values that repeat across a big run's units: stamps to the second, states, a fingerprint's
# environment digest and directory. Decoded, each would be its own string object (orjson makes a
# new one per occurrence): at 100,000 units, some 50 MB of copies. sys.intern keeps one of each
# (its table holds no reference of its own: a value goes when its last unit lets it go).
_SHARED_KEYS: Final = ("status", "createdAt", "updatedAt", "startedAt", "finishedAt")


def share_repeats(units: dict[str, Any]) -> None:
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


def _decode_chunked(read: Callable[[int, int], bytes], chunk: int,
                    pick: Callable[[str, Any], Any] | None) -> tuple[Decoded, int] | None:
    size = 0

    def more() -> bytes:
        nonlocal size
        piece = read(size, chunk)
        size += len(piece)
        return piece

    # The document up to its units' opening brace.
    buf = b""
    while True:
        piece = more()
        if not piece:
            return None
        buf += piece
        at = buf.find(_UNITS_OPEN)
        if at >= 0:
            break
        if len(buf) > _HEAD_MAX:
            return None
    cut = at + len(_UNITS_OPEN) - len(_ENTRY) + 1  # just past the "{"
    head = buf[:cut]
    if not head.startswith(b'{\n  "'):
        return None
    # The brace must open the value of the document's own (single) "units" key: then the head
    # closed by two braces is a document whose last key is "units".
    outline = jsonio.loads(head + b"}}")
    if not isinstance(outline, dict) or list(outline)[-1] != "units" or outline["units"] != {}:
        return None
    del outline
    crc = zlib.crc32(head)

    # The units, a run of whole entries at a time, into one dict in the file's order (a repeated
    # key keeps its first place and takes its last value, as in a whole parse). A run is decoded
    # as "[{" run "}]", as deep as it lies in the document, in place in the buffer: its last
    # comma becomes the closing brace. A run that does not decode reaches past the units' end.
    units: dict[str, Any] = {}
    runs = bytearray(b"[{")
    runs += memoryview(buf)[cut:]  # "\n    \"key\": ..." onwards
    del buf
    piece = b"-"
    while piece:
        piece = more()
        runs += piece
        split = runs.rfind(_ENTRY, 2)
        if not piece or split < 0:
            continue
        rest = runs[split + 1 :]
        del runs[split + 1 :]
        runs[split] = ord("}")
        runs.append(ord("]"))
        try:
            part = jsonio.loads(runs)
        except ValueError:
            part = None
        if not (isinstance(part, list) and len(part) == 1 and isinstance(part[0], dict)):
            del runs[split:]  # as it was: the units' end is in this run
            runs += b","
            runs += rest
            break
        _take(units, part[0], pick)
        del part
        runs[split] = ord(",")
        crc = zlib.crc32(memoryview(runs)[2 : split + 1], crc)
        runs = bytearray(b"[{")
        runs += rest
    end = runs.find(_UNITS_CLOSE, 2)
    if end < 0:
        return None
    crc = zlib.crc32(memoryview(runs)[2:end], crc)
    buf = bytes(runs[end:])
    del runs[end:]
    runs += b"}]"
    part = jsonio.loads(runs)
    if not (isinstance(part, list) and len(part) == 1 and isinstance(part[0], dict)):
        return None
    _take(units, part[0], pick)
    del part, runs

    # The rest: the units' closing brace to the end of the file, small in a run's snapshot.
    pieces = [buf]
    before = size - len(buf)
    while piece := more():
        pieces.append(piece)
    tail = b"".join(pieces)
    del pieces, buf
    if b'\n  "units": ' in tail:
        return None
    doc = jsonio.loads(head + b"}" + tail[len(_UNITS_CLOSE) :])
    if not isinstance(doc, dict) or doc.get("units") != {}:
        return None
    doc["units"] = units  # its place in the document's order stays the one the file gave it
    # The marker as decode() takes it, and intact as peek() finds it: only then is this decode()'s
    # answer (any other is left to decode() itself).
    raw = doc.pop(MARKER_KEY, None)
    if not (
        isinstance(raw, dict)
        and isinstance(raw.get("seq"), int)
        and isinstance(raw.get("offset"), int)
        and isinstance(raw.get("crc"), str)
    ):
        return None
    if _peek(tail, before, crc) is None:
        return None
    return Decoded(doc, Marker(raw["seq"], raw["offset"]), True), size
