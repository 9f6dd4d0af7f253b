"""Outcome words: whole words only, the last one wins, whatever the chunking."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.guard.outcome import counts_as_failure, last_outcome_word, outcome


@pytest.mark.parametrize(("text", "expected"), [
    (b"the cycle completed successfully", None),  # the seed: success
    (b"unsuccessful", None),
    (b"halting now", None),  # the seed: halt
    (b"Outcome: SUCCESS.", "success"),
    (b"success\nthen a Failure", "failure"),
    (b"noop", "noop"),
    (b"status=halt;", "halt"),
    (b"halt_reason: none", None),
    (b"", None),
])
def test_words(text: bytes, expected: str | None) -> None:
    assert last_outcome_word([text]) == expected


_WHOLE = re.compile(rb"\b(success|noop|failure|halt)\b", re.IGNORECASE)
_pieces = st.lists(st.sampled_from([b"success", b"noop", b"failure", b"halt", b"fully", b"un", b"_", b" ", b".",
                                    b"\n", b"x", b"SUCCESS", b"Halt"]), max_size=30)


@given(_pieces, st.lists(st.integers(0, 40), max_size=10))
def test_chunking_never_changes_the_answer(pieces: list[bytes], cuts: list[int]) -> None:
    text = b"".join(pieces)
    matches = _WHOLE.findall(text)
    expected = matches[-1].decode().lower() if matches else None
    points = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert last_outcome_word(chunks) == expected
    assert last_outcome_word(text[i:i + 1] for i in range(len(text))) == expected


def test_outcome_rules() -> None:
    assert outcome(0, None) == "success"
    assert outcome(3, None) == "failure"
    assert outcome(0, [b"nothing to say"]) == "unknown"
    assert outcome(1, [b"success"]) == "failure"  # a failed exit is a failure whatever it printed
    assert [counts_as_failure(s) for s in ("success", "noop", "failure", "halt", "unknown")] == \
        [False, False, True, True, None]
