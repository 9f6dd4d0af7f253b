"""Trailers parsed exactly as the seed's ``^Key:[ \\t]*(.+?)\\s*$`` (multiline) plus trim()."""

from __future__ import annotations

import pytest

from resumable.errors import InvalidInputError
from resumable.git.trailers import is_safe_id, parse_trailers, trailer_block


@pytest.mark.parametrize(("message", "expect"), [
    ("subject\n\nRun-Id: r1\nTask-Id: t1\nPlan-Id: p1\n", {"Run-Id": "r1", "Task-Id": "t1", "Plan-Id": "p1"}),
    ("Task-Id: a", {"Task-Id": "a"}),
    ("x\nTask-Id:   \nTask-Id: b", {"Task-Id": ""}),           # `.+?` takes one space; trim() leaves ""
    ("Task-Id:\nTask-Id: c ", {"Task-Id": "c"}),               # nothing after the colon: no match there
    ("Task-Id:\u00a0 d\u00a0\r\nfoo", {"Task-Id": "d"}),       # \r ends a JavaScript line; trim() is Unicode
    (" Task-Id: e", {}),                                       # must start the line
    ("task-id: e", {}),                                        # case matters
    ("Task-Id: f\u2028g", {"Task-Id": "f"}),                   # U+2028 ends a line too
    ("Task-Id:\tg h  ", {"Task-Id": "g h"}),
    ("Task-Id: first\nTask-Id: second", {"Task-Id": "first"}),  # the first occurrence wins
    ("body mentions Task-Id: x inline", {}),
])
def test_parse_trailers_like_the_seed(message: str, expect: dict[str, str]) -> None:
    """Expected values printed by Node for the seed's regex on the same messages."""
    assert parse_trailers(message) == expect


def test_parse_only_the_keys_asked() -> None:
    assert parse_trailers("Run-Id: r\nTask-Id: t\n", ("Task-Id",)) == {"Task-Id": "t"}


@pytest.mark.parametrize(("value", "ok"), [
    ("t1", True), ("A.b_c-9", True), ("x" * 128, True), ("x" * 129, False), ("", False), ("-t", False),
    (".t", False), ("a..b", False), ("a/b", False), ("a b", False), ("tâche", False), (None, False),
])
def test_safe_id(value: object, ok: bool) -> None:
    assert is_safe_id(value) is ok


def test_trailer_block() -> None:
    assert trailer_block("r1", "t1", "p1") == "Run-Id: r1\nTask-Id: t1\nPlan-Id: p1"
    with pytest.raises(InvalidInputError, match="Task-Id"):
        trailer_block("r1", "../x", "p1")
