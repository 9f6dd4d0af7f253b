"""Text from data made safe to print: no raw control characters ever reach a terminal.

A task, note, unit id, phase name or argument may hold ESC, BEL, CR or newlines (a hand-edited file,
a hostile job): printed raw they retitle a window, clear the screen or forge output lines. Every
control character is shown escaped instead (``\\x1b``, ``\\n``), so one value stays on one line.
"""

from __future__ import annotations

# C0 controls, DEL and C1 controls (U+0080-U+009F: a terminal takes U+009B as ESC [).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_CONTROLS.update({0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"})
# Line and paragraph separators and bidirectional overrides can reorder or break what is shown.
_CONTROLS.update({c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape."""
    if text.isprintable():
        return text
    return text.translate(_CONTROLS)


def one_line(text: str) -> str:
    """An error or log line: control characters escaped, so it is exactly one line."""
    return escape_controls(text)
