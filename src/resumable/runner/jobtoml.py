"""A TOML job file's text -> its document: rtoml when installed (a 100,000-step file parses in a
fraction of a second instead of seconds), read a run of step tables at a time for a large file,
and every error worded as the standard library's ``tomllib`` words it."""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from resumable.errors import InvalidInputError


def parse_toml(text: str, path: Path) -> dict[str, object]:
    """The document, through rtoml when it is installed (a 100,000-step file parses in a fraction of
    a second instead of seconds); every error is reported as the standard library words it."""
    import tomllib

    data = _rtoml_loads(text)
    if data is not None:
        return data
    try:
        return tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of more digits than Python converts
        raise InvalidInputError(f"{path}: not valid TOML: {exc}") from exc


def _rtoml_loads(text: str) -> dict[str, object] | None:
    """The document as rtoml reads it, or None (not installed, or an error tomllib will word)."""
    try:
        import rtoml
    except ImportError:
        return None
    try:
        data = _loads_in_pieces(rtoml.loads, text) if len(text) >= _PIECES_MIN else None
        if data is None:
            data = rtoml.loads(text)
    except Exception:
        return None
    return data if isinstance(data, dict) else None


# rtoml builds its own tree of the whole file before it makes a single Python object: a
# 100,000-step file of 4.5 MB peaks near 200 MB, and the freed memory stays with the process for
# the whole run. A large file is parsed a run of whole step tables at a time instead, each piece a
# complete TOML document, and the pieces' steps joined. Only where that is sure to read the file as
# a whole parse does: pieces start at a ``[steps.ID]`` header line, every later piece declares only
# ``[steps.…]`` tables, no multi-line string can hide a header-like line, and no step is defined in
# two pieces; anything else (or any piece that does not parse) is left to the whole parse, whose
# answer, and error, it then is.
_PIECES_MIN = 512 << 10
_PIECE = 256 << 10
_PIECE_START = re.compile(r"^\[steps\.[A-Za-z0-9_-]+\]", re.M)
_HEADER_LINE = re.compile(r"^[ \t]*\[", re.M)
_INLINE_STEPS = re.compile(r"""^[ \t]*["']?steps["']?[ \t]*=""", re.M)


def _loads_in_pieces(loads: Callable[[str], Any], text: str) -> dict[str, Any] | None:
    """The document ``loads(text)`` would return, parsed a piece at a time; None when the file is
    not laid out so that this is sure to (the caller then parses it whole)."""
    if '"""' in text or "'''" in text:
        return None
    cuts = [0]
    for match in _PIECE_START.finditer(text, _PIECE):
        if match.start() - cuts[-1] >= _PIECE:
            cuts.append(match.start())
    if len(cuts) == 1:
        return None
    cuts.append(len(text))
    if _INLINE_STEPS.search(text, 0, cuts[1]):
        return None  # steps written inline cannot take more tables: the whole parse says so
    data = loads(text[:cuts[1]])
    if not isinstance(data, dict):
        return None
    steps = data.setdefault("steps", {})
    if not isinstance(steps, dict):
        return None
    for start, end in pairwise(cuts[1:]):
        for line in _HEADER_LINE.finditer(text, start, end):
            if not text.startswith("[steps.", line.end() - 1):
                return None
        piece = loads(text[start:end])
        more = piece.get("steps") if isinstance(piece, dict) and len(piece) == 1 else None
        if not isinstance(more, dict) or not more.keys().isdisjoint(steps):
            return None
        steps.update(more)
    return data
