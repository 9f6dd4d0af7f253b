"""The snapshot file: a pretty-printed JSON view of the document plus a trailing marker.

The file is what `cat`, `jq` and the seed tools read: the document as ``JSON.stringify(doc, null,
2)`` would print it, with one extra last key, ``"_journal": {"seq", "offset", "crc"}``, that ties
the view to the journal. ``crc`` is the CRC-32 of every byte before the marker, so an edit by
another program (the seed documents ``jq ... > tmp && mv tmp file``) is detected without
re-serialising anything: the bytes no longer match. A file without a marker is either a seed
document (no journal yet) or a file rewritten from scratch by another program.
"""

from __future__ import annotations

import zlib

from resumable.core import jsonio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

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
    idx = data.rfind(_MARKER_SEP)
    if idx <= 0:
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
        and raw.get("crc") == f"{zlib.crc32(memoryview(data)[:idx]):08x}"
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
