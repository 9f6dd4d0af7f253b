"""Building a large run's unit index (``index.py``) from its whole document: a new file, made
beside the old one and renamed over it, so a reader holding the old one keeps a consistent (if
behind) index. Not fsynced: the index is derived from the journal, and an index from before a
reboot is never read (``index.boot_id``).
"""

from __future__ import annotations

import os

from resumable import fsio
from resumable.core import jsonio
from resumable.store.files.index import (
    EMPTY_SLOT,
    MIN_SLOTS,
    PAGE,
    SLOT,
    SLOT_STRUCT,
    Header,
    boot_id,
    digest_line,
    head_of,
    unit_hash,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def build(path: str, doc: Mapping[str, Any], journal: tuple[int, int, int, int, int],
          snap: tuple[tuple[int, int, int], int, int]) -> None:
    """Write a new index of ``doc`` at ``path`` (temp file + rename; not fsynced: see the module
    docstring). ``journal`` = (inode, seq, end offset, crc32 of the last record's line, its
    length); ``snap`` = (the snapshot's stat key, its marker's seq and offset)."""
    raw_units = doc.get("units")
    units: Mapping[str, Any] = raw_units if isinstance(raw_units, dict) else {}
    count = len(units)
    nslots = MIN_SLOTS
    while nslots < count * 2:  # at most half full when built: room to grow by half before a rebuild
        nslots *= 2
    table = bytearray(nslots * SLOT)
    digs: list[bytes] = []
    for uid, unit in units.items():
        digs.append(digest_line(uid, unit))
    dig_start = PAGE + nslots * SLOT
    dig_bytes = sum(map(len, digs))
    dig_cap = max(1 << 16, 3 * dig_bytes + 256 * count)
    val_start = dig_start + dig_cap
    head_bytes = jsonio.dumps(head_of(doc))
    tmp = _temp(path)
    fd = fsio.open_regular(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        val_end = val_start
        dig_off = dig_start
        batch: list[bytes] = []
        batch_at = val_start
        live = 0
        for (uid, unit), dig in zip(units.items(), digs, strict=True):
            val = jsonio.dumps(unit)
            home, tag = unit_hash(uid)
            i = home & (nslots - 1)
            while table[i * SLOT : (i + 1) * SLOT] != EMPTY_SLOT:
                i = (i + 1) & (nslots - 1)
            table[i * SLOT : (i + 1) * SLOT] = SLOT_STRUCT.pack(tag, dig_off, val_end, len(dig), len(val))
            dig_off += len(dig)
            val_end += len(val)
            live += len(val)
            batch.append(val)
            if len(batch) >= 1000:
                fsio.pwrite_all(fd, b"".join(batch), batch_at, tmp)
                batch_at = val_end
                batch = []
        batch.append(head_bytes)
        fsio.pwrite_all(fd, b"".join(batch), batch_at, tmp)
        head_off = val_end
        val_end += len(head_bytes)
        fsio.pwrite_all(fd, b"".join(digs), dig_start, tmp)
        fsio.pwrite_all(fd, bytes(table), PAGE, tmp)
        jino, seq, jend, jcrc, jlen = journal
        key, snap_seq, snap_off = snap
        header = Header((boot_id(), jino, seq, jend, jcrc, jlen, *key, snap_seq, snap_off, nslots, count,
                         count, dig_start, dig_off, dig_cap, val_start, val_end, live, head_off,
                         len(head_bytes), 0, 0, 0, 0))
        fsio.pwrite_all(fd, header.pack(), 0, tmp)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)
    try:
        fsio.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _temp(path: str) -> str:
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.tmp.{os.getpid()}")
    _unlink_quietly(tmp)  # left by a killed process that had our pid: nobody is writing it
    return tmp


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def remove(path: str) -> None:
    """Drop the index (it is only ever rebuilt): what cannot be kept exact must not be read."""
    try:
        fsio.unlink(path)
    except FileNotFoundError:
        pass
