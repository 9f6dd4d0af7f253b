"""Journal record framing and scanning.

A record is one line: ``<seq> <crc32 as 8 hex> <compact JSON event>\\n``. The checksum covers
``<seq> <json>`` so a record moved, duplicated or bit-flipped is caught. Rules when scanning:

- a final fragment without a newline is a write in flight or torn by a crash: readers ignore it,
  the next writer truncates it away (it was never acknowledged: fsync had not returned);
- any complete line that fails its checksum, does not parse, or breaks the gap-free sequence is
  corruption: a one-line error naming the file and byte offset, and nothing is rewritten.
"""

from __future__ import annotations

import zlib

from resumable import jsonio
from resumable.errors import CorruptRunError, InvalidInputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def encode(seq: int, event: dict[str, Any]) -> bytes:
    try:
        payload = jsonio.dumps(event)
    except (ValueError, TypeError) as exc:
        # e.g. a note holding bytes that are not UTF-8 (argv decoded with surrogateescape).
        raise InvalidInputError(f"value cannot be stored as JSON: {exc}") from exc
    head = b"%d " % seq
    crc = zlib.crc32(payload, zlib.crc32(head))
    return b"%s%08x %s\n" % (head, crc, payload)


class Scan:
    __slots__ = ("end", "records", "torn")

    def __init__(self, records: list[tuple[int, dict[str, Any]]], end: int, torn: int) -> None:
        self.records = records  # (seq, event)
        self.end = end  # absolute offset just past the last complete record
        self.torn = torn  # bytes of a final fragment without a newline (0 if none)


def decode_line(line: bytes) -> tuple[int, dict[str, Any]] | None:
    """(seq, event) or None if the line is not a valid record."""
    try:
        sp1 = line.index(b" ")
        sp2 = line.index(b" ", sp1 + 1)
        seq = int(line[:sp1])
        crc = int(line[sp1 + 1 : sp2], 16)
    except ValueError:
        return None
    payload = line[sp2 + 1 :]
    if zlib.crc32(payload, zlib.crc32(line[: sp1 + 1])) != crc or sp2 - sp1 != 9:
        return None
    try:
        event = jsonio.loads(payload)
    except ValueError:
        return None
    if not isinstance(event, dict) or not isinstance(event.get("t"), str):
        return None
    return seq, event


def scan(data: bytes, *, base: int, path: str, after_seq: int) -> Scan:
    """Parse ``data`` (the journal's bytes from absolute offset ``base``). ``after_seq`` is the
    sequence number of the record just before ``base`` (0 at the start of the file)."""
    records: list[tuple[int, dict[str, Any]]] = []
    pos = 0
    expect = after_seq + 1
    n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return Scan(records, base + pos, n - pos)
        decoded = decode_line(data[pos:nl])
        if decoded is None:
            raise CorruptRunError(
                f"{path}: corrupt journal record at byte offset {base + pos}: nothing was changed;"
                " move the journal aside to fall back to the snapshot, or restore it from a backup"
            )
        seq, _event = decoded
        if seq != expect:
            raise CorruptRunError(
                f"{path}: journal record at byte offset {base + pos} has sequence {seq}, expected"
                f" {expect}: nothing was changed; restore the journal from a backup"
            )
        records.append(decoded)
        expect += 1
        pos = nl + 1
    return Scan(records, base + pos, 0)
