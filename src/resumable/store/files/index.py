"""The unit index (``S.index``): one unit of a large run found, read and rewritten without decoding
the others, and every unit's digest read without decoding any unit whole.

Why a sidecar and not the snapshot itself: the snapshot is the pretty JSON `cat`, `jq` and the
ulpi tools read, refreshed on an amortised budget, so the journal records after it can be as many
as the snapshot is long; a reader of one unit would have to replay them all. The index is kept
current with the journal by every writer, record by record, in O(1) per record:

    page 0      the header: what it reflects (the journal's inode, the sequence number, end offset and
                CRC of the last record applied), the snapshot it was last seen with, the regions'
                ends, the head (the document without its units) and the redo list of the last commit
    slots       an open-addressing table, 32 bytes a slot: (tag, digest offset, value offset,
                digest length, value length), keyed by the CRC-32 of the unit id
    digests     append-only, fixed capacity, one line ``<id as JSON>\t<digest as JSON>`` per unit
                version, where the digest is the few fields the status views count (``digest``):
                read in one go, the last line of an id is its current digest, and the ids' first
                lines are in the document's order
    values      append-only: each unit version's compact JSON, the head's, and the redo lists

A commit appends the new values and digests, then writes the header (whose redo list holds the new
slots), then the slots. The header is the commit point: a process killed anywhere before it leaves
the old header, whose bytes all still stand (regions are append-only and slots are only written
after it); one killed after it leaves a header whose redo list a reader lays over the slots. The
header carries a CRC, so a torn one is refused, and the boot it was written in: nothing of the index
is ever fsynced (the journal holds every record durably), so after a reboot the page cache it lived
in may have lost any part of it, and it is rebuilt. Readers check the header against the journal
(the record it ends at must be there, whole), apply the records after it, and re-read the header
after reading slots, retrying when a writer committed meanwhile.
"""

from __future__ import annotations

import os
import struct
import zlib

from resumable import fsio
from resumable.core import jsonio
from resumable.core.model import is_stored
from resumable.store.files.loader import pread_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any, Final

    from resumable.core.types import RunDocument as Doc
    from resumable.core.types import Unit

MAGIC = b"RSIDX\x00\x00\x02"  # the format: another one is never read, only rebuilt
PAGE = 4096
_HEADER = struct.Struct("<8sI16s" + "QQQII" + "QQQqQ" + "QQQ" + "QQQ" + "QQQ" + "QII" + "QII")
SLOT_STRUCT = struct.Struct("<QQQII")
SLOT = SLOT_STRUCT.size
_REDO = struct.Struct("<Q32s")
EMPTY_SLOT = bytes(SLOT)
MIN_SLOTS = 256
# Fields of a unit that the views count and walk without its whole value (``digest``).
_LITE_KEYS = ("status", "dependsOn", "removed")
RECONCILED = "reconciled-from-trailer"


class Full(Exception):
    """The slot table or the digest region has no room: the index is rebuilt larger."""


_boot: list[bytes] = []


def boot_id() -> bytes:
    """This boot's id (the kernel's random boot id), or empty when the system has none: then no
    index is trusted, since nothing tells a reboot apart."""
    if not _boot:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
                raw = fh.read(64).strip().replace(b"-", b"")
            _boot.append(bytes.fromhex(raw.decode("ascii"))[:16].ljust(16, b"\0"))
        except (OSError, ValueError):
            _boot.append(b"")
    return _boot[0]


def digest(unit: Any) -> Any:
    """What the views count and walk of a unit: its status, needs and removal, and the note of a
    unit reconciled from a commit trailer; a malformed unit (not an object) as it is."""
    if unit.__class__ is not dict:
        return unit
    lite = {k: unit[k] for k in _LITE_KEYS if k in unit}
    note = unit.get("note")
    if isinstance(note, str) and note.startswith(RECONCILED):
        lite["note"] = note
    return lite


def digest_line(uid: str, unit: Any) -> bytes:
    return jsonio.dumps(uid) + b"\t" + jsonio.dumps(digest(unit)) + b"\n"


def unit_hash(uid: str) -> tuple[int, int]:
    """(home slot hash, tag): two independent checksums of the id; the tag is never 0 (empty)."""
    raw = uid.encode("utf-8", "surrogatepass")
    return zlib.crc32(raw), (zlib.crc32(raw) << 32) | zlib.adler32(raw)


class Header:
    """The header page's fields (see the module docstring), in their order on disk."""

    __slots__ = ("boot", "count", "dig_cap", "dig_end", "dig_start", "head_len", "head_off", "jcrc", "jend",
        "jino", "jlen", "live", "next_ord", "nslots", "redo_crc", "redo_len", "redo_off", "seq", "snap_ino",
        "snap_mtime", "snap_off", "snap_seq", "snap_size", "spare", "val_end", "val_start")

    boot: bytes
    jino: int
    seq: int
    jend: int
    jcrc: int
    jlen: int
    snap_ino: int
    snap_size: int
    snap_mtime: int
    snap_seq: int
    snap_off: int
    nslots: int
    count: int
    next_ord: int
    dig_start: int
    dig_end: int
    dig_cap: int
    val_start: int
    val_end: int
    live: int
    head_off: int
    head_len: int
    spare: int
    redo_off: int
    redo_len: int
    redo_crc: int

    FIELDS: Final = ("boot", "jino", "seq", "jend", "jcrc", "jlen", "snap_ino", "snap_size", "snap_mtime",
        "snap_seq", "snap_off", "nslots", "count", "next_ord", "dig_start", "dig_end", "dig_cap",
        "val_start", "val_end", "live", "head_off", "head_len", "spare", "redo_off", "redo_len", "redo_crc")

    def __init__(self, values: Iterable[Any]) -> None:
        for name, value in zip(self.FIELDS, values, strict=True):
            setattr(self, name, value)

    def pack(self) -> bytes:
        body = _HEADER.pack(MAGIC, 0, *(getattr(self, n) for n in self.FIELDS))
        crc = zlib.crc32(body[12:])
        return (body[:8] + struct.pack("<I", crc) + body[12:]).ljust(PAGE, b"\0")

    @classmethod
    def unpack(cls, page: bytes) -> Header | None:
        if len(page) < _HEADER.size or page[:8] != MAGIC:
            return None
        fields = _HEADER.unpack_from(page)
        if fields[1] != zlib.crc32(page[12 : _HEADER.size]):
            return None
        return cls(fields[2:])

    def snap_key(self) -> tuple[int, int, int]:
        return (self.snap_ino, self.snap_size, self.snap_mtime)


class Index:
    """An open index; its methods read through the header it was opened with."""

    __slots__ = ("fd", "h", "page", "path", "redo")

    def __init__(self, fd: int, path: str, header: Header, redo: dict[int, bytes]) -> None:
        self.fd = fd
        self.path = path
        self.h = header
        self.page = b""  # the header page ``h`` was read from
        self.redo = redo

    @classmethod
    def open(cls, path: str, *, writable: bool = False) -> Index | None:
        """The index at ``path``, or None when there is none or it cannot be trusted (damaged,
        another format, written before this boot)."""
        try:
            fd = fsio.open_regular(path, os.O_RDWR if writable else os.O_RDONLY)
        except OSError:
            return None
        ix = cls(fd, path, _blank(), {})
        if not ix.reread():
            ix.close()
            return None
        return ix

    def reread(self) -> bool:
        """Read the header afresh; False when it cannot be trusted."""
        try:
            page = os.pread(self.fd, PAGE, 0)
        except OSError:
            return False
        h = Header.unpack(page)
        boot = boot_id()
        if h is None or not boot or h.boot != boot:
            return False
        redo: dict[int, bytes] = {}
        if h.redo_len:
            try:
                blob = os.pread(self.fd, h.redo_len, h.redo_off)
            except OSError:
                return False
            if len(blob) != h.redo_len or zlib.crc32(blob) != h.redo_crc:
                return False
            for i, slot in _REDO.iter_unpack(blob):
                redo[i] = slot
        self.h = h
        self.page = page
        self.redo = redo
        return True

    def raw_header(self) -> bytes:
        """The header page as it is on disk now (a reader compares it with ``page``)."""
        return os.pread(self.fd, PAGE, 0)

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass

    def same_file(self) -> bool:
        """Whether the path still names this index (a rebuild replaces the file)."""
        try:
            return os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(self.fd).st_ino
        except OSError:
            return False

    # -- reads --
    def _read(self, offset: int, length: int) -> bytes:
        data = pread_all(self.fd, offset, length)
        if len(data) != length:
            raise ValueError("index region cut short")
        return data

    def find(self, uid: str, pending: Mapping[int, bytes] | None = None,
             ) -> tuple[int, tuple[int, int, int, int, int] | None]:
        """(slot number, slot) of ``uid``; the slot None with the number of the free slot where it
        would go. ``pending``: slots of the commit being built, laid over the table."""
        home, tag = unit_hash(uid)
        key = jsonio.dumps(uid)
        n = self.h.nslots
        i = home & (n - 1)
        for _ in range(n):
            block = 16 if i + 16 <= n else n - i
            raw = self._read(PAGE + i * SLOT, block * SLOT)
            for j in range(block):
                k = i + j
                slot = (pending.get(k) if pending else None) or self.redo.get(k) \
                    or raw[j * SLOT : (j + 1) * SLOT]
                if slot == EMPTY_SLOT:
                    return k, None
                fields = SLOT_STRUCT.unpack(slot)
                if fields[0] == tag and self._read(fields[1], fields[3]).partition(b"\t")[0] == key:
                    return k, fields
            i = (i + block) & (n - 1)
        raise Full("slot table full")

    def unit(self, slot: tuple[int, int, int, int, int]) -> Any:
        """The value of the unit a slot holds."""
        return jsonio.loads(self._read(slot[2], slot[4]))

    def head(self) -> Doc:
        """The document without its units: a ``units`` key stands where they go, holding {}."""
        head = jsonio.loads(self._read(self.h.head_off, self.h.head_len))
        if not is_stored(head):
            raise ValueError("index head is not an object")
        return head

    def digest_units(self) -> dict[str, Unit]:
        """Every unit's digest by id, in the document's order: the digest region read a piece at a
        time, each unit's last version kept (in the place of its first, as in the document). Equal
        digests are one shared object (read-only: copy one before changing it)."""
        units: dict[str, Unit] = {}
        shared: dict[bytes, Any] = {}
        for lines in self._digest_lines():
            ids = jsonio.loads(b"[" + b",".join(u for u, _t, _d in lines) + b"]")
            for uid, (_u, _t, dig) in zip(ids, lines, strict=True):
                value = shared.get(dig)
                if value is None:
                    value = shared[dig] = jsonio.loads(dig)
                units[uid] = value
        if len(units) != self.h.count:
            raise ValueError("index digests do not match its count")
        return units

    def _digest_lines(self, piece: int = 1 << 20) -> Iterator[list[tuple[bytes, bytes, bytes]]]:
        """The digest region's lines, split at the tab, a megabyte or so at a time."""
        at, end = self.h.dig_start, self.h.dig_end
        rest = b""
        while at < end:
            data = rest + self._read(at, min(piece, end - at))
            at += min(piece, end - at)
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield [line.partition(b"\t") for line in data[: cut - 1].split(b"\n")]
        if rest:
            raise ValueError("index digest region ends inside a line")

    def document(self) -> Doc:
        """The whole document the index holds (what a full load gives), for checks."""
        head = self.head()
        order = [jsonio.loads(u) for lines in self._digest_lines() for u, _t, _d in lines]
        units: dict[str, Unit] = {}
        for uid in order:
            if uid not in units:
                _, slot = self.find(uid)
                if slot is None:
                    raise ValueError(f"index has a digest but no slot for {uid!r}")
                units[uid] = self.unit(slot)
        return with_units(head, units)

    # -- the commit --
    def commit(self, changes: Mapping[str, Any], head: Mapping[str, Any], journal: tuple[int, int, int, int],
               ) -> None:
        """Make ``changes`` (unit id -> new value) and the new head current as of the journal record
        ``journal`` = (seq, end offset, crc32 of its line, its length). Raises Full (nothing
        committed) or OSError (the index is left as it was, or behind the journal: both safe)."""
        h = self.h
        values: list[bytes] = []
        digs: list[bytes] = []
        slots: dict[int, bytes] = {}
        val_end, dig_end, count, next_ord, live = h.val_end, h.dig_end, h.count, h.next_ord, h.live
        val_at, dig_at = val_end, dig_end
        for uid, value in changes.items():
            i, slot = self.find(uid, slots)
            if slot is None:
                if (count + 1) * 4 > h.nslots * 3:
                    raise Full("slot table full")
                next_ord += 1
                count += 1
            else:
                live -= slot[4]
            val = jsonio.dumps(value)
            dig = digest_line(uid, value)
            slots[i] = SLOT_STRUCT.pack(unit_hash(uid)[1], dig_at, val_at, len(dig), len(val))
            values.append(val)
            digs.append(dig)
            val_at += len(val)
            dig_at += len(dig)
            live += len(val)
        head_bytes = jsonio.dumps(dict(head))
        head_off = val_at
        values.append(head_bytes)
        redo = b"".join(_REDO.pack(i, s) for i, s in slots.items())
        redo_off = head_off + len(head_bytes)
        values.append(redo)
        dig_bytes = b"".join(digs)
        if dig_end + len(dig_bytes) > h.dig_start + h.dig_cap:
            raise Full("digest region full")
        new = Header(getattr(h, n) for n in Header.FIELDS)
        new.seq, new.jend, new.jcrc, new.jlen = journal
        new.count, new.next_ord, new.live = count, next_ord, live
        new.dig_end = dig_end + len(dig_bytes)
        new.val_end = redo_off + len(redo)
        new.head_off, new.head_len = head_off, len(head_bytes)
        new.redo_off, new.redo_len, new.redo_crc = redo_off, len(redo), zlib.crc32(redo)
        fsio.pwrite_all(self.fd, b"".join(values), val_end, self.path)
        fsio.pwrite_all(self.fd, dig_bytes, dig_end, self.path)
        # The last commit's slots may not all have reached the table (its writer was killed after
        # its header): the new header's redo list replaces that one, so they are written first.
        for i, done in sorted(self.redo.items()):
            fsio.pwrite_all(self.fd, done, PAGE + i * SLOT, self.path)
        fsio.pwrite_all(self.fd, new.pack(), 0, self.path)  # the commit point
        self.h = new
        self.redo = slots
        for i, packed in sorted(slots.items()):
            fsio.pwrite_all(self.fd, packed, PAGE + i * SLOT, self.path)

    def note_snapshot(self, key: tuple[int, int, int], seq: int, offset: int) -> None:
        """The snapshot was refreshed: record it as the one this index was last seen with."""
        new = Header(getattr(self.h, n) for n in Header.FIELDS)
        new.snap_ino, new.snap_size, new.snap_mtime = key
        new.snap_seq, new.snap_off = seq, offset
        fsio.pwrite_all(self.fd, new.pack(), 0, self.path)
        self.h = new

    def wasteful(self) -> bool:
        """Whether superseded versions outweigh the live ones enough to rebuild (amortised O(1))."""
        h = self.h
        return h.val_end - h.val_start > 4 * h.live + (1 << 20)


def _blank() -> Header:
    return Header([b""] + [0] * (len(Header.FIELDS) - 1))


def head_of(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The document without its units (their place kept by an empty ``units``)."""
    return {k: ({} if k == "units" else v) for k, v in doc.items()}


def with_units(head: Doc, units: dict[str, Unit]) -> Doc:
    """A document from its head and units (in the place the head keeps for them)."""
    head["units"] = units
    return head
