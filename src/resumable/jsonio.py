"""JSON encoding and decoding for the store, tuned for a CLI that starts thousands of times.

Two libraries, each where it wins: the standard library's ``json`` imports in about a millisecond
and its C encoder/scanner are fast on small values (journal records, small documents); ``orjson``
is several times faster on large documents but its import pulls in dataclasses, inspect, uuid and
more (tens of milliseconds), so it is imported only when a document is big. Both are strict: NaN,
Infinity, invalid UTF-8 and absurd nesting are decode errors (``ValueError``), never crashes.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Above this many bytes, orjson's speed pays for its import.
BIG = 256 * 1024

_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_pretty = json.JSONEncoder(ensure_ascii=False, indent=2, allow_nan=False)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # Proof suite R9: "1e999" parses to inf, which the encoder (allow_nan=False) then refuses with
    # an uncaught ValueError mid-command; reject it at the boundary like NaN/Infinity.
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


# One decoder for the process: json.loads(s, **options) builds a new one per call, which costs
# more than decoding a journal record.
_decoder = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def loads(data: bytes) -> Any:
    """Decode UTF-8 JSON bytes. Raises ValueError (JSONDecodeError, UnicodeDecodeError, nesting
    too deep, NaN/Infinity) for anything that is not strict JSON."""
    if len(data) > BIG:
        import orjson

        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(str(exc)) from exc
    try:
        return _decoder.decode(data.decode("utf-8"))
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces, raw UTF-8), as JSON.stringify prints it."""
    try:
        return _compact.encode(value).encode("utf-8")
    except RecursionError as exc:
        raise ValueError("value nested too deeply to encode") from exc


def dumps_pretty(value: Any, *, big: bool = False) -> bytes:
    """Two-space indented JSON without a trailing newline, as ``JSON.stringify(v, null, 2)``.
    ``big`` selects orjson (the standard library's indenting encoder is pure Python)."""
    if big:
        import orjson

        try:
            return orjson.dumps(value, option=orjson.OPT_INDENT_2)
        except TypeError:
            pass  # integers beyond 64 bits: fall back to the standard library
    try:
        return _pretty.encode(value).encode("utf-8")
    except RecursionError as exc:
        raise ValueError("value nested too deeply to encode") from exc
