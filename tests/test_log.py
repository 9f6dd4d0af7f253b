"""`resumable log`: a run's history for people, and the raw records for tools."""

from __future__ import annotations

import json
import time
from pathlib import Path

import resumable
from corehelpers import assert_error, cli, journal_of, ok


def make(runs: Path) -> resumable.Run:
    run = resumable.open_run("r", runs_dir=runs)
    run.init("migrate users", units=["extract", "load"])
    run.unit("extract", "in_progress")
    run.unit("extract", "done", note="42 rows")
    run.item({"issue": "3 rows without email"})
    run.finalize("needs_attention", result="half way")
    run.close()
    return run


def test_one_line_per_event_in_order(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make(runs)
    lines = ok(cli("log", "r", runs=runs)).splitlines()
    assert len(lines) == 5
    assert "#1 " in lines[0] and "init r: migrate users (2 unit(s))" in lines[0]
    assert "unit extract -> done" in lines[2] and "42 rows" in lines[2]
    assert "item: 1 finding(s) recorded" in lines[3]
    assert lines[4].endswith("finalize needs_attention — half way")
    assert all(line[:4].isdigit() and line[19] == "Z" for line in lines)  # each starts with its time


def test_json_prints_the_records_as_stored(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = make(runs)
    out = ok(cli("log", "r", "--json", runs=runs))
    assert out == journal_of(run).read_text()
    objects = [json.loads(line) for line in out.splitlines()]
    assert [o["seq"] for o in objects] == [1, 2, 3, 4, 5]
    since = ok(cli("log", "r", "--json", "--since", "3", runs=runs)).splitlines()
    assert [json.loads(line)["seq"] for line in since] == [4, 5]


def test_control_characters_in_data_never_reach_the_terminal(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a"])
    run.unit("a", "blocked", note="\x1b]0;owned\x07\x1b[2J")
    out = ok(cli("log", "r", runs=runs))
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;owned" in out


def test_errors(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make(runs)
    assert_error(cli("log", "nope", runs=runs), 3, "no run matches")
    assert_error(cli("log", "r", "--since", "-1", runs=runs), 1, "--since")
    assert_error(cli("log", runs=tmp_path / "none"), 3, "no runs under")


def test_the_newest_run_by_default(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make(runs)
    time.sleep(1.05)  # stamps are to the second: the newer run's must sort after
    newer = resumable.open_run("s", runs_dir=runs)
    newer.init("the newer one")
    newer.close()
    out = ok(cli("log", runs=runs))
    assert "init s: the newer one" in out and "init r" not in out
    assert ok(cli("log", runs=runs)) == ok(cli("log", "s", runs=runs))


def test_an_unreadable_run_is_an_error_not_an_empty_history(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "bad.json").write_text("{ not json")  # a snapshot alone, damaged: nothing to trust
    before = (runs / "bad.json").read_bytes()
    assert_error(cli("log", "bad", runs=runs), 1, "bad.json")
    assert (runs / "bad.json").read_bytes() == before
    # A readable run written by checkpoint.mjs has a document and no history: said so, exit 0.
    (runs / "seed.json").write_text(json.dumps({"schemaVersion": 2, "id": "seed", "task": "t",
                                                "status": "running", "units": {}}))
    got = cli("log", "seed", runs=runs)
    assert (got.returncode, got.stdout) == (0, "")
    assert got.stderr == (f"resumable: warning: run seed: no history recorded (a run written by checkpoint.mjs keeps"
                          f" only its document); `resumable status seed --dir {runs}` shows the run\n")
