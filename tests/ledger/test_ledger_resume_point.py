"""``resume-point``: the first phase without a trustworthy checkpoint, and why each earlier one is
trusted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ledgerhelpers import PAYLOADS, RUN, cli, document, plant

from resumable import ledger


def _write(base: Path, phase: str, attempt: int = 1, timestamp: str = "2026-03-28T22:00:00Z", **kw: Any) -> None:
    ledger.write_checkpoint(document(phase, attempt=attempt, timestamp=timestamp, **kw), base_dir=base)


def test_the_first_phase_without_a_checkpoint(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(base, "implement", timestamp="2026-03-28T10:00:00Z")
    _write(base, "local_review", timestamp="2026-03-28T11:00:00Z")
    code, out, _ = cli(capsys, "resume-point", "--ticket-id", "OMN-2143", "--run-id", "a1b2c3d4", base=base)
    data = json.loads(out)
    assert code == 0 and data["success"] is True and data["resume_phase"] == "create_pr"
    verdicts = {p["phase"]: p for p in data["phases"]}
    assert verdicts["implement"]["trusted"] and verdicts["implement"]["reason"] == \
        "attempt 1 is valid, completed 2026-03-28T10:00:00Z"
    assert verdicts["local_review"]["reason"] == \
        "attempt 1 is valid, completed 2026-03-28T11:00:00Z, after implement attempt 1"
    assert verdicts["create_pr"] == {"phase": "create_pr", "ordinal": 3, "trusted": False, "attempt_number": None,
                                     "checkpoint_path": None, "reason": "no checkpoint"}
    assert verdicts["ready_for_merge"]["reason"] == "comes after the resume point (create_pr)"


def test_every_phase_done(base: Path) -> None:
    for i, phase in enumerate(PAYLOADS):
        _write(base, phase, timestamp=f"2026-03-28T1{i}:00:00Z")
    point = ledger.resume_point("OMN-2143", RUN, base_dir=base)
    assert point.resume_phase is None and all(p.trusted for p in point.phases)


def test_a_corrupt_newest_attempt_falls_back_with_a_warning(base: Path) -> None:
    _write(base, "implement")
    plant(base, "phase_1_implement_a2.yaml", "oops: [")
    point = ledger.resume_point("OMN-2143", RUN, base_dir=base)
    assert point.phases[0].trusted and point.phases[0].attempt_number == 1
    assert point.resume_phase == "local_review"
    assert any("phase_1_implement_a2.yaml: invalid YAML" in w for w in point.warnings)


def test_only_corrupt_attempts_stop_there(base: Path) -> None:
    plant(base, "phase_1_implement_a1.yaml", "")
    point = ledger.resume_point("OMN-2143", RUN, base_dir=base)
    assert point.resume_phase == "implement"
    assert point.phases[0].reason == "no valid checkpoint (newest, a1: expected mapping, got NoneType)"


def test_a_phase_older_than_the_phase_it_builds_on_is_stale(base: Path) -> None:
    """implement was re-done (attempt 2) after local_review completed: local_review must be redone."""
    _write(base, "implement", timestamp="2026-03-28T10:00:00Z")
    _write(base, "local_review", timestamp="2026-03-28T11:00:00Z")
    _write(base, "implement", attempt=2, timestamp="2026-03-28T12:00:00Z")
    point = ledger.resume_point("OMN-2143", RUN, base_dir=base)
    assert point.resume_phase == "local_review"
    assert point.phases[1].reason == ("attempt 1 (2026-03-28T11:00:00Z) predates implement attempt 2 "
                                      "(2026-03-28T12:00:00Z), which it builds on")


def test_root_evidence_is_required_when_given(base: Path, tmp_path: Path) -> None:
    _write(base, "implement", artifact_paths=["src/foo.py"])
    assert ledger.resume_point("OMN-2143", RUN, base_dir=base).resume_phase == "local_review"
    point = ledger.resume_point("OMN-2143", RUN, base_dir=base, root=tmp_path)
    assert point.resume_phase == "implement"
    assert point.phases[0].reason == \
        f"attempt 1 fails validation: Artifact path does not exist under {tmp_path}: src/foo.py"


def test_no_run_at_all(base: Path) -> None:
    point = ledger.resume_point("OMN-2143", "never-ran", base_dir=base)
    assert point.resume_phase == "implement" and point.phases[0].reason == "no checkpoint"
