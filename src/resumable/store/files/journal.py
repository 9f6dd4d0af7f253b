"""Journal records: one JSON object per line, with its format version, sequence number and checksum.

A record is the event's own JSON object with three keys added, so that `jq`, `grep` and `tail -f`
read a live journal as they read any JSON Lines file::

    {"v":1,"seq":12,"t":"unit","unit":"load","state":"done","at":"2026-11-30T08:00:00Z","crc":"1a2b3c4d"}

``crc`` is the CRC-32 of every byte of the line before ``,"crc":``, so a record moved, duplicated or
bit-flipped is caught without re-encoding anything. ``v`` is the record format: a record with a
``v`` newer than this code knows is refused as written by a newer resumable (``NewerFormatError``),
never read as corruption and never misread.

Journals written by resumable 0.1.0 (``<seq> <crc32 hex> <json>`` lines, possibly followed by zero
bytes of padding) still load; records are always written in the form above, and a writer cuts any
old padding off before its first record.

Scanning rules:

- a final fragment without a newline is a write in flight or torn by a crash: readers ignore it,
  the next writer cuts it off (it was never acknowledged: its fsync had not returned). Not when it
  is a whole record followed by another byte (a flipped newline: damage, not a torn write), nor
  when a snapshot's marker acknowledged it (``loader``): that is corruption;
- any complete line that fails its checksum, does not parse, or breaks the gap-free sequence is
  corruption: a one-line error naming the file and byte offset, and nothing is rewritten;
- the first zero byte ends the records (old padding; no record holds one, JSON escapes it). Bytes
  after it that are not zero are debris of a write torn by a power cut, treated like a torn
  fragment, unless a whole valid record follows them, which only corruption can produce.
"""

from __future__ import annotations

import zlib

from resumable.core import jsonio
from resumable.core.events import is_event
from resumable.errors import CorruptRunError, InvalidInputError, NewerFormatError

TYPE_CHECKING = False
if TYPE_CHECKING:

    from resumable.core.types import Event

FORMAT = 1
RESERVED = frozenset({"v", "seq", "crc"})
_HEAD = b'{"v":%d,"seq":%%d,' % FORMAT
_CRC_KEY = b',"crc":"'
_SUFFIX = len(b',"crc":"00000000"}')  # 18 bytes after the checksummed part


def encode(seq: int, event: Event) -> bytes:
    """One record line (newline-terminated) for ``event`` at sequence number ``seq``."""
    if not RESERVED.isdisjoint(event):
        raise InvalidInputError(f"an event may not carry the keys {', '.join(sorted(RESERVED))}")
    try:
        payload = jsonio.dumps(event)
    except (ValueError, TypeError) as exc:
        # e.g. a note holding bytes that are not UTF-8 (argv decoded with surrogateescape).
        raise InvalidInputError(f"value cannot be stored as JSON: {exc}") from exc
    body = _HEAD % seq + payload[1:-1]
    return b'%s,"crc":"%08x"}\n' % (body, zlib.crc32(body))


class Scan:
    __slots__ = ("end", "records", "torn")

    def __init__(self, records: list[tuple[int, Event]], end: int, torn: int) -> None:
        self.records = records  # (seq, event)
        self.end = end  # absolute offset just past the last complete record
        # Bytes after ``end`` a writer must cut off before writing there (a torn fragment, torn-write
        # debris, old padding), 0 if none.
        self.torn = torn


def _legacy_frame(line: bytes) -> tuple[int, bytes] | None:
    """(seq, JSON payload) of a 0.1.0 record line if its framing and checksum are intact."""
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
    return seq, payload


def _intact(line: bytes) -> bool:
    """Whether ``line`` (without its newline) is a record of the current form whose checksum holds."""
    return (
        line[-_SUFFIX : -_SUFFIX + len(_CRC_KEY)] == _CRC_KEY
        and line[-2:] == b'"}'
        and b"%08x" % zlib.crc32(line[:-_SUFFIX]) == line[-10:-2]
    )


def decode_line(line: bytes) -> tuple[int, Event] | None:
    """(seq, event) or None if the line is not a valid record. Raises NewerFormatError for an intact
    record a newer resumable wrote: newer formats keep this framing (``v`` first, ``crc`` last over
    the bytes before it) and may change anything between, so a bit flip that happens to raise
    ``v`` is still caught as corruption by the checksum."""
    if line[:1] != b"{":
        framed = _legacy_frame(line)
        if framed is None:
            return None
        try:
            event = jsonio.loads(framed[1])
        except ValueError:
            return None
        if not is_event(event):
            return None
        return framed[0], event
    intact = _intact(line)
    try:
        record = jsonio.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    version = record.get("v")
    if intact and isinstance(version, int) and not isinstance(version, bool) and version > FORMAT:
        raise NewerFormatError(
            f"journal record {record.get('seq', '?')} was written by a newer resumable (record format"
            f" {version}, this one reads up to {FORMAT}): upgrade resumable to read this run")
    seq = record.pop("seq", None)
    if not intact or version != FORMAT or not isinstance(seq, int):
        return None
    del record["v"], record["crc"]
    return (seq, record) if is_event(record) else None


def scan(data: bytes, *, base: int, path: str, after_seq: int) -> Scan:
    """Parse ``data`` (the journal's bytes from absolute offset ``base``). ``after_seq`` is the
    sequence number of the record just before ``base`` (0 at the start of the file)."""
    records: list[tuple[int, Event]] = []
    pos = 0
    expect = after_seq + 1
    n = data.find(b"\0")
    if n < 0:
        n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos, n)
        if nl < 0:
            break
        try:
            decoded = decode_line(data[pos:nl])
        except NewerFormatError as exc:
            # Named by file, as corruption is: "upgrade" must say which run needs it.
            raise NewerFormatError(f"{path}: {exc}") from None
        if decoded is None:
            raise _corrupt(path, base + pos)
        seq = decoded[0]
        if seq != expect:
            raise _out_of_sequence(path, base + pos, seq, expect)
        records.append(decoded)
        expect += 1
        pos = nl + 1
    if n - pos > 1 and _whole_record(data[pos : n - 1]):
        # A whole record followed by a byte that is not its newline: not a write torn by a crash
        # (a torn write leaves a prefix), but a damaged acknowledged record. Never cut off.
        raise _corrupt(path, base + pos)
    return Scan(records, base + pos, _junk_after(data, pos, n, base, path))


def _whole_record(line: bytes) -> bool:
    return (line[:1] == b"{" and _intact(line)) or (line[:1] != b"{" and _legacy_frame(line) is not None)


def _junk_after(data: bytes, end: int, pad: int, base: int, path: str) -> int:
    """How many bytes after the last record (at ``end``) a writer must cut off: everything from
    ``end``. A valid record beyond the first zero byte means the zeros are a hole punched in
    acknowledged history: corruption, reported at the record the hole broke."""
    n = len(data)
    if pad < n and data.count(b"\0", pad) != n - pad:
        pos = pad
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            line = data[pos:nl].lstrip(b"\0")
            if _legacy_frame(line) is not None or (line[:1] == b"{" and _intact(line)):
                raise _corrupt(path, base + end)
            pos = nl + 1
    return n - end


def _corrupt(path: str, offset: int) -> CorruptRunError:
    return CorruptRunError(
        f"{path}: corrupt journal record at byte offset {offset}: nothing was changed;"
        " move the journal aside to fall back to the snapshot, or restore it from a backup"
    )


def _out_of_sequence(path: str, offset: int, seq: int, expect: int) -> CorruptRunError:
    return CorruptRunError(
        f"{path}: journal record at byte offset {offset} has sequence {seq}, expected {expect}:"
        " nothing was changed; restore the journal from a backup"
    )
