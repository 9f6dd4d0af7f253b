"""``resumable checkpoint show``: a ticket's runs x phases x attempts, with validity, for people.

Every string that came from a file or a directory name is escaped: a checkpoint can carry any
text, and a terminal must never receive its control characters.
"""

from __future__ import annotations

import datetime as dt

from resumable.ledger.model import Schema
from resumable.ledger.store import StoredFile, StoredRun

# C0, DEL, C1, line/paragraph separators and the bidirectional overrides (which reorder what a terminal
# shows): all escaped.
_BIDI = {0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F}


def escape(text: str) -> str:
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif code in _BIDI:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(ticket_id: str, base: str, runs: list[StoredRun], schema: Schema) -> str:
    files = sum(len(r.files) for r in runs)
    lines = [f"Checkpoints of ticket {escape(ticket_id)} under {escape(base)}: {len(runs)} run(s), {files} file(s)"]
    if not runs:
        lines.append("(none)")
    for run in runs:
        lines.append("")
        if run.problem is not None:
            lines.append(f"run {escape(run.run_id)}  SKIPPED: {escape(run.problem)}")
            continue
        lines.append(f"run {escape(run.run_id)}  first written {_when(run.first_write_ns)}")
        rows = [("PHASE", "ATTEMPT", "STATUS", "COMPLETED (UTC)", "DETAIL")]
        rows.extend(_rows(run, schema))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for row in rows:
            cells = [row[i].ljust(widths[i]) for i in range(4)]
            lines.append(("  " + "  ".join(cells) + "  " + row[4]).rstrip())
    return "\n".join(lines) + "\n"


def _rows(run: StoredRun, schema: Schema) -> list[tuple[str, str, str, str, str]]:
    by_phase: dict[tuple[int, str], list[StoredFile]] = {(p.ordinal, p.name): [] for p in schema.phases.phases}
    for f in run.files:
        by_phase.setdefault((f.ordinal, f.phase), []).append(f)
    rows = []
    for (ordinal, phase), files in sorted(by_phase.items()):
        label = f"{ordinal} {escape(phase)}"
        known = schema.phases.get(phase) is not None and schema.ordinal(phase) == ordinal
        if not files:
            rows.append((label, "-", "missing", "", ""))
            continue
        valid = [f.attempt for f in files if f.checkpoint is not None]
        newest_valid = max(valid, default=None)
        for f in sorted(files, key=lambda f: f.attempt):
            if f.checkpoint is not None:
                status = "valid" if f.attempt == newest_valid else "valid (older)"
                stamp = f.checkpoint.timestamp_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
                detail = ""
            else:
                status, stamp = "CORRUPT", ""
                detail = escape(f.problem or "") if known else "not a phase of this pipeline"
            rows.append((label, f"a{f.attempt}", status, stamp, detail))
    return rows
