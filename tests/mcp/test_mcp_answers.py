"""The pure parts of the server, without a process: answers' bounds, cursors, argument checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.errors import InvalidInputError
from resumable.mcp import answers
from resumable.mcp.bound import bounded, job_file, run_id, unit_filter


@given(st.lists(st.text(max_size=5000), max_size=200), st.integers(min_value=1, max_value=1000))
def test_a_page_never_overflows_its_budget(texts: list[str], limit: int) -> None:
    page = answers.Page(limit)
    taken, more = answers.fill(page, texts, lambda t: {"note": answers.clip(t)})
    assert taken == len(page.items) <= limit
    assert answers.size(page.items) <= answers.PAGE_BUDGET + 2 or len(page.items) == 1
    assert more == (taken < len(texts))


def test_clip_marks_what_it_cut() -> None:
    assert answers.clip("x" * 1000, 10) == "x" * 9 + "…"
    assert answers.clip("short") == "short" and answers.clip(7) == 7
    assert answers.clip_list(list("abcdef"), 3) == ["a", "b", "c", "… and 3 more"]


def test_control_characters_in_data_come_out_escaped() -> None:
    assert "\x1b" not in answers.dumps({"note": "\x1b[31mred\x07"})


def test_an_answer_over_the_limit_is_a_bug_not_a_flood() -> None:
    with pytest.raises(AssertionError):
        answers.answer({"x": "y" * (answers.ANSWER_LIMIT + 1)})


def test_a_cursor_belongs_to_its_query() -> None:
    q = answers.query_key("list_units", run="r", state=None)
    cursor = answers.make_cursor(q, {"i": 5, "after": "u4"})
    assert answers.read_cursor(cursor, q) == {"q": q, "i": 5, "after": "u4"}
    assert answers.read_cursor(None, q) is None and answers.read_cursor("", q) is None
    other = answers.query_key("list_units", run="r", state="done")
    for bad, query in ((cursor, other), ("%%%", q), ("A" * 5000, q), (cursor[:-3], q)):
        with pytest.raises(InvalidInputError, match="cursor"):
            answers.read_cursor(bad, query)
    forged = answers.make_cursor(q, {"i": -1})
    state = answers.read_cursor(forged, q)
    assert state is not None
    with pytest.raises(InvalidInputError, match="damaged"):
        answers.cursor_int(state, "i")


@pytest.mark.parametrize("rid", ["../x", "/etc/passwd", "x.json", "a/b", "..", "", "x" * 200, "a b", 5, None])
def test_a_run_id_is_never_a_path(rid: object) -> None:
    with pytest.raises(InvalidInputError):
        run_id(rid)


def test_bounds_and_states() -> None:
    assert bounded(5, "limit", 1, 10) == 5
    for bad in (0, 11, -1, True, 1.5, "5", None):
        with pytest.raises(InvalidInputError, match="limit must be"):
            bounded(bad, "limit", 1, 10)
    assert unit_filter("running") == "in_progress" and unit_filter(None) is None
    with pytest.raises(InvalidInputError, match="unknown state"):
        unit_filter("exploded")


def test_job_files_stay_below_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "a.toml").write_text("")
    outside = tmp_path / "b.toml"
    outside.write_text("")
    (root / "link.toml").symlink_to(outside)
    os.symlink(tmp_path, root / "up")
    assert job_file("jobs/a.toml", str(root)) == "jobs/a.toml"
    assert job_file("./jobs//a.toml", str(root)) == "jobs/a.toml"
    for bad in (str(outside), "../b.toml", "jobs/../../b.toml", "link.toml", "up/b.toml", "jobs", "jobs/a.txt",
                "missing.toml", "", "~/b.toml"):
        with pytest.raises(InvalidInputError):
            job_file(bad, str(root))
