"""``show``: the table for people (runs x phases x attempts, validity), with data escaped."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledgerhelpers import RUN, cli, document, plant

from resumable import ledger
from resumable.ledger import yamlfmt


def test_the_table(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger.write_checkpoint(document(), base_dir=base)
    ledger.write_checkpoint(document(attempt=2, timestamp="2026-03-29T08:00:00Z"), base_dir=base)
    plant(base, "phase_2_local_review_a1.yaml", "[broken")
    code, out, err = cli(capsys, "show", "OMN-2143", base=base)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"Checkpoints of ticket OMN-2143 under {base}: 1 run(s), 3 file(s)"
    assert lines[2].startswith(f"run {RUN}  first written ")
    table = [line.split() for line in lines[3:]]
    assert table[0] == ["PHASE", "ATTEMPT", "STATUS", "COMPLETED", "(UTC)", "DETAIL"]
    assert table[1] == ["1", "implement", "a1", "valid", "(older)", "2026-03-28T22:00:00Z"]
    assert table[2] == ["1", "implement", "a2", "valid", "2026-03-29T08:00:00Z"]
    assert table[3] == ["2", "local_review", "a1", "CORRUPT", "invalid", "YAML"]
    assert table[4] == ["3", "create_pr", "-", "missing"]
    assert len(table) == 7


def test_control_characters_from_data_are_escaped(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = document(repo_commit_map={"\x1b[31mred\x1b[0m": "zz"})
    plant(base, "phase_1_implement_a1.yaml", yamlfmt.dump(evil))
    code, out, _ = cli(capsys, "show", "OMN-2143", base=base)
    assert code == 0 and "\x1b" not in out and "\\x1b[31mred" in out


def test_no_checkpoints(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "show", "OMN-2143", base=base)
    assert code == 0 and "0 run(s), 0 file(s)" in out and "(none)" in out


def test_a_bad_ticket_is_one_line(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "show", "../x", base=base)
    assert code == 1 and out == "" and err.startswith("resumable: Invalid ticket_id") and err.count("\n") == 1
