"""The file store's UnitDigest: a little of every unit, read without holding every unit, only when the
snapshot is current; any other run is left to load()."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import resumable
from resumable import store
from resumable.store.backend import UnitDigest


def keep(uid: str, unit: Any) -> Any:
    return unit


def made(runs: Path, n: int = 30) -> resumable.Run:
    run = resumable.open_run("r", runs_dir=runs)
    run.init("task", units=[f"u{i}" for i in range(n)])
    for i in range(0, n, 3):
        run.unit(f"u{i}", "done", note=f"n{i}")
    run.flush()
    return run


def test_a_current_snapshot_digests_to_what_load_reads(tmp_path: Path) -> None:
    run = made(tmp_path / "runs")
    handle = store.open_path(run.path)
    assert isinstance(handle, UnitDigest)
    doc = handle.load()
    assert doc is not None
    found = store.open_path(run.path).digest(keep)
    assert found is not None
    head, units = found
    assert units == doc["units"] and list(units) == list(doc["units"])
    assert head == {k: v for k, v in doc.items() if k != "units"}


def test_pick_keeps_only_what_it_returns(tmp_path: Path) -> None:
    run = made(tmp_path / "runs")
    found = store.open_path(run.path).digest(lambda uid, u: u["status"] if u["status"] == "done" else None)
    assert found is not None
    assert found[1] == {f"u{i}": "done" for i in range(0, 30, 3)}


def test_a_journal_ahead_of_the_snapshot_is_left_to_load(tmp_path: Path) -> None:
    run = made(tmp_path / "runs", n=2000)  # a large run: its snapshot is refreshed on a budget
    for i in range(1, 6):
        run.unit(f"u{i}", "done")
    handle = store.open_path(run.path)
    if handle.digest(keep) is None:  # the snapshot lags the journal
        doc = handle.load()
        assert doc is not None and doc["units"]["u5"]["status"] == "done"
    run.flush()
    found = store.open_path(run.path).digest(keep)
    assert found is not None and found[1]["u5"]["status"] == "done"


def test_a_record_after_the_snapshot_is_left_to_load(tmp_path: Path) -> None:
    run = made(tmp_path / "runs")
    before = run.path.read_bytes()
    run.unit("u1", "done")
    run.close()
    run.path.write_bytes(before)  # a snapshot one record behind its journal
    assert store.open_path(run.path).digest(keep) is None
    doc = store.open_path(run.path).load()
    assert doc is not None and doc["units"]["u1"]["status"] == "done"


def test_an_edited_snapshot_or_a_seed_event_log_is_left_to_load(tmp_path: Path) -> None:
    run = made(tmp_path / "runs")
    run.close()
    data = json.loads(run.path.read_text())
    data["units"]["u1"]["note"] = "edited"
    run.path.write_text(json.dumps(data, indent=2) + "\n")
    assert store.open_path(run.path).digest(keep) is None
    other = made(tmp_path / "other")
    other.close()
    assert store.open_path(other.path).digest(keep) is not None
    Path(os.fspath(other.path).removesuffix(".json") + ".events.jsonl").write_text("")
    assert store.open_path(other.path).digest(keep) is None


def test_a_run_with_no_snapshot_has_no_digest(tmp_path: Path) -> None:
    assert store.open_path(tmp_path / "missing.json").digest(keep) is None
    run = made(tmp_path / "runs")
    run.close()
    run.path.unlink()  # the journal alone: load() rebuilds the document from it
    assert store.open_path(run.path).digest(keep) is None
    doc = store.open_path(run.path).load()
    assert doc is not None and len(doc["units"]) == 30
