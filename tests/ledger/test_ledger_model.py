"""The checkpoint model: frozen, strict, one rule set, and a YAML round trip that is exact."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledgerhelpers import PAYLOADS, document

from resumable import ledger
from resumable.ledger import layout, yamlfmt
from resumable.ledger.ids import is_sha
from resumable.ledger.model import CheckpointInvalid, to_dict


def test_frozen() -> None:
    cp = ledger.parse_checkpoint(document())
    with pytest.raises(AttributeError):
        cp.attempt_number = 2  # type: ignore[misc]


@pytest.mark.parametrize(("change", "fragment"), [
    ({"attempt_number": "2"}, "Expected `int`, got `str`"),
    ({"attempt_number": True}, "Expected `int`, got `bool`"),
    ({"attempt_number": 2.0}, "Expected `int`, got `float`"),
    ({"attempt_number": 0}, "attempt_number must be >= 1, got 0"),
    ({"surprise": 1}, "unknown field `surprise`"),
    ({"run_id": "not-a-uuid"}, "Invalid UUID"),
    ({"timestamp_utc": "yesterday"}, "Invalid RFC3339"),
    ({"artifact_paths": ["a/../b"]}, "Path traversal segment '..' forbidden in artifact path: 'a/../b'"),
    ({"phase": "deploy", "phase_payload": {"phase": "deploy"}}, "Invalid phase: deploy"),
    ({"phase_payload": {"phase": "implement", "branch_name": "", "commit_sha": "a1b2c3d"}}, "length >= 1"),
    ({"phase_payload": {"phase": "implement", "branch_name": "b", "commit_sha": "a1b2c3d", "x": 1}}, "unknown field"),
])
def test_strict(change: dict[str, Any], fragment: str) -> None:
    doc = document()
    doc.update(change)
    with pytest.raises(CheckpointInvalid) as info:
        ledger.parse_checkpoint(doc)
    assert fragment in str(info.value)


def test_times_are_stored_in_utc() -> None:
    cp = ledger.parse_checkpoint(document(timestamp="2026-03-28T23:30:00+01:30"))
    assert to_dict(cp)["timestamp_utc"] == "2026-03-28T22:00:00Z"


@given(st.text(max_size=45))
def test_one_sha_rule(sha: str) -> None:
    built = ledger.validate(document(repo_commit_map={"r": sha})).is_valid
    assert built is is_sha(sha) is (7 <= len(sha) <= 40 and all(c in "0123456789abcdef" for c in sha))


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)


@given(branch=_text.filter(bool), files=st.lists(_text, max_size=4), repos=st.dictionaries(_text, st.just("a1b2c3d")),
       attempt=st.integers(1, 10**9), micros=st.integers(0, 999_999))
def test_yaml_round_trip(branch: str, files: list[str], repos: dict[str, str], attempt: int, micros: int) -> None:
    when = dt.datetime(2026, 3, 28, 22, 0, 0, micros, tzinfo=dt.UTC).isoformat()
    doc = document(attempt=attempt, timestamp=when, repo_commit_map=repos,
                   phase_payload={"phase": "implement", "branch_name": branch, "commit_sha": "a1b2c3d",
                                  "files_changed": files})
    cp = ledger.parse_checkpoint(doc)
    again = ledger.parse_checkpoint(yamlfmt.load(yamlfmt.dump(to_dict(cp))))
    assert again == cp and to_dict(again) == to_dict(cp)


def test_file_names() -> None:
    assert layout.file_name(1, "implement", 3) == "phase_1_implement_a3.yaml"
    assert layout.parse_file_name("phase_2_local_review_a10.yaml") == (2, "local_review", 10)
    assert layout.parse_file_name("phase_1_data_analysis_a3.yaml") == (1, "data_analysis", 3)  # the last _a
    for bad in ("phase_1_implement.yaml", "phase_x_implement_a1.yaml", "phase_1_implement_a.yaml",
                "phase_1_implement_a1.yml", "phase_1__a1.yaml", "phase_1_implement_a١.yaml"):
        assert layout.parse_file_name(bad) is None, bad


def test_the_yaml_loader_builds_no_objects() -> None:
    with pytest.raises(yamlfmt.YAMLError):
        yamlfmt.load(b"!!python/object/apply:os.system ['true']")


def test_payload_types_are_msgspec_structs() -> None:
    cp = ledger.parse_checkpoint(document("create_pr"))
    assert isinstance(cp.phase_payload, msgspec.Struct) and cp.phase_payload.pr_number == 7  # type: ignore[attr-defined]
    assert PAYLOADS["create_pr"]["pr_number"] == 7


def test_importing_the_package_and_the_commands_help_load_nothing_heavy() -> None:
    code = ("import sys, resumable.ledger, resumable.guard, resumable.cli.checkpoint, resumable.cli.guard;"
            "print(sorted({'yaml', 'msgspec', 'pydantic'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
