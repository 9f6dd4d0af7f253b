"""A seed run whose hash-chained event log (``<id>.events.jsonl``, spec §1.5) is ahead of its
snapshot: readers show the log's document, the next write adopts it (one base record saying so)
before its own change, the log is never written, and a log that cannot be verified fails closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from seedhelpers import SeedWriter, js_digest

from corehelpers import RESUMABLE, assert_error, ok, records, tree
from resumable.store.files import ulpi_eventlog

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"


def _unit() -> dict[str, Any]:
    return {"status": "pending", "dependsOn": [], "note": "", "createdAt": T0, "updatedAt": T0}


# The document exactly as the seed's `init` writes it (spec §1.2).
SEED_DOC: dict[str, Any] = {
    "schemaVersion": 2, "id": "demo", "task": "migrate", "status": "running", "createdAt": T0,
    "updatedAt": T0, "phases": {}, "units": {"a": _unit(), "b": _unit(), "c": _unit()},
    "openItems": [], "resolvedItems": [], "result": None,
}

# What the seed's pipeline appends, in order; each leaves a fact a reader can check.
TRANSITIONS: list[tuple[str, list[str], Any]] = [
    ("merge", ["units", "a"], {"status": "done", "finishedAt": T1, "updatedAt": T1}),
    ("set", ["currentPhase"], "build"),
    ("merge", ["units", "b"], {"status": "done", "finishedAt": T1, "updatedAt": T1}),
    ("set", ["phases", "build"], {"status": "running", "updatedAt": T1}),
]


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ULPI_"))}
    out["CLAUDE_CONFIG_DIR"] = "/nonexistent-claude"
    return out


def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RESUMABLE, *args], cwd=cwd, capture_output=True, text=True, env=env(),
                          timeout=60, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".ulpi" / "runs").mkdir(parents=True)
    return tmp_path


def runs(project: Path) -> Path:
    return project / ".ulpi" / "runs"


def seed_run(project: Path, *, stale_by: int, transitions: int = len(TRANSITIONS)) -> SeedWriter:
    """A seed run with an event log of 1 + ``transitions`` records whose snapshot missed the last
    ``stale_by`` of them (the seed crashed between appending and renaming its snapshot)."""
    writer = SeedWriter(runs(project) / "demo.json")
    writer.init(SEED_DOC)
    for i, (op, path, value) in enumerate(TRANSITIONS[:transitions]):
        writer.transition(op, path, value, snapshot=i < transitions - stale_by)
    return writer


def status_json(project: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ok(sh(project, "status", "demo", "--json")))
    return doc


def journal(project: Path) -> list[dict[str, Any]]:
    return [event for _, event in records(runs(project) / "demo.journal.jsonl")]


def test_the_fixture_hashes_are_the_seeds() -> None:
    assert ulpi_eventlog.digest(SEED_DOC) == js_digest(SEED_DOC)


def test_a_snapshot_one_event_behind_reads_as_the_log(project: Path) -> None:
    seed_run(project, stale_by=1)
    before = tree(project)
    stale = json.loads((runs(project) / "demo.json").read_text())
    assert "build" not in stale["phases"]  # the missed event
    doc = status_json(project)
    assert doc["phases"]["build"]["status"] == "running"
    assert doc["units"]["b"]["status"] == "done"
    assert "▶ build" in ok(sh(project, "status", "demo", "--no-color"))
    summary = json.loads(ok(sh(project, "get", ".ulpi/runs/demo.json", "--summary")))
    assert summary["done"] == 2
    assert tree(project) == before  # readers change nothing, not even a lock file


def test_a_write_adopts_the_events_first_and_never_writes_the_log(project: Path) -> None:
    writer = seed_run(project, stale_by=3)
    log_bytes = writer.log.read_bytes()
    assert status_json(project)["units"]["b"]["status"] == "done"
    ok(sh(project, "unit", "demo", "c", "done"))
    assert writer.log.read_bytes() == log_bytes
    base, unit = journal(project)
    assert base["t"] == "base"
    assert base["reason"] == "adopted demo.events.jsonl: 3 events ahead of the snapshot"
    assert base["doc"]["units"]["b"]["status"] == "done" and base["doc"]["currentPhase"] == "build"
    assert unit["t"] == "unit" and unit["unit"] == "c"
    on_disk = json.loads((runs(project) / "demo.json").read_text())
    assert [on_disk["units"][u]["status"] for u in "abc"] == ["done", "done", "done"]
    assert on_disk["phases"]["build"]["status"] == "running"
    assert on_disk["adoptedEventLog"] == {"file": "demo.events.jsonl", "events": 5,
                                          "afterHash": js_digest(writer.doc)}
    assert "adopted demo.events.jsonl: 3 events ahead" in ok(sh(project, "log", "demo"))


def test_the_adoption_is_recorded_once(project: Path) -> None:
    seed_run(project, stale_by=2)
    ok(sh(project, "unit", "demo", "c", "in_progress"))
    ok(sh(project, "phase", "demo", "build", "done"))
    ok(sh(project, "unit", "demo", "c", "done"))
    kinds = [e["t"] for e in journal(project)]
    assert kinds == ["base", "unit", "phase", "unit"]
    doc = status_json(project)
    assert doc["phases"]["build"]["status"] == "done" and doc["units"]["c"]["status"] == "done"


def test_a_log_in_step_with_the_snapshot_adopts_nothing(project: Path) -> None:
    writer = seed_run(project, stale_by=0)
    log_bytes = writer.log.read_bytes()
    before = tree(project)
    assert status_json(project) == json.loads(writer.snapshot.read_text())  # read as the file is
    assert tree(project) == before
    ok(sh(project, "unit", "demo", "c", "done"))
    base, _ = journal(project)
    assert base["t"] == "base" and base["reason"] == "import"  # the seed file, taken as it is
    # ...noting the log's position, so that what the seed appends later is known to be new.
    assert base["doc"]["adoptedEventLog"] == {"file": "demo.events.jsonl", "events": 5,
                                              "afterHash": js_digest(writer.doc)}
    assert writer.log.read_bytes() == log_bytes


def test_the_seed_appending_after_an_adoption_is_merged_not_lost(project: Path) -> None:
    writer = seed_run(project, stale_by=1)
    ok(sh(project, "unit", "demo", "c", "done"))  # adopts 1 event
    # The seed appends one more transition and crashes before its snapshot rename.
    writer.transition("set", ["phases", "test"], {"status": "running"}, snapshot=False)
    doc = status_json(project)
    assert doc["phases"]["test"] == {"status": "running"}
    assert doc["units"]["c"]["status"] == "done"  # what resumable recorded since is kept
    ok(sh(project, "unit", "demo", "a", "done"))
    bases = [e["reason"] for e in journal(project) if e["t"] == "base"]
    assert bases == ["adopted demo.events.jsonl: 1 event ahead of the snapshot"] * 2
    ok(sh(project, "unit", "demo", "b", "done"))
    assert [e["t"] for e in journal(project)].count("base") == 2


def test_a_torn_final_fragment_is_dropped_and_left_in_place(project: Path) -> None:
    writer = seed_run(project, stale_by=1)
    with open(writer.log, "a", encoding="utf-8") as f:
        f.write('{"v":1,"op":"set","path":["result"],"value":"torn')
    log_bytes = writer.log.read_bytes()
    doc = status_json(project)
    assert doc["result"] is None and doc["phases"]["build"]["status"] == "running"
    ok(sh(project, "unit", "demo", "c", "done"))
    assert journal(project)[0]["reason"] == "adopted demo.events.jsonl: 1 event ahead of the snapshot"
    assert writer.log.read_bytes() == log_bytes  # the seed's own next append trims it, not us


def _break(lines: list[str], index: int, how: str) -> None:
    record = json.loads(lines[index])
    if how == "corrupt":
        lines[index] = '{"v":1,"op":"merge","path":["units"\n'
    elif how == "before-hash":
        record["beforeHash"] = "0" * 64
        lines[index] = json.dumps(record, separators=(",", ":")) + "\n"
    else:  # after-hash: the recorded result is not what the transition gives
        record["value"] = {"status": "blocked"}
        lines[index] = json.dumps(record, separators=(",", ":")) + "\n"


@pytest.mark.parametrize(("how", "expect"), [
    ("corrupt", "line 3 is corrupt"),
    ("before-hash", "line 3 breaks the beforeHash chain"),
    ("after-hash", "line 3 breaks the afterHash chain"),
])
def test_a_log_that_cannot_be_verified_fails_closed(project: Path, how: str, expect: str) -> None:
    writer = seed_run(project, stale_by=2)
    lines = writer.log.read_text(encoding="utf-8").splitlines(keepends=True)
    _break(lines, 2, how)
    writer.log.write_text("".join(lines), encoding="utf-8")
    before = tree(project)
    for args in (["status", "demo"], ["get", "demo"], ["unit", "demo", "c", "done"],
                 ["phase", ".ulpi/runs/demo.json", "build", "done"]):
        line = assert_error(sh(project, *args), 1, "demo.events.jsonl", expect)
        assert "nothing was changed" in line
    assert tree(project) == before  # no journal, no lock file, the snapshot untouched


def test_a_corrupt_last_line_fails_closed_too(project: Path) -> None:
    writer = seed_run(project, stale_by=0)
    with open(writer.log, "a", encoding="utf-8") as f:
        f.write("not json\n")
    before = tree(project)
    assert_error(sh(project, "unit", "demo", "c", "done"), 1, "demo.events.jsonl", "last line")
    assert tree(project) == before


def test_a_link_in_place_of_the_log_is_refused(project: Path, tmp_path: Path) -> None:
    writer = seed_run(project, stale_by=1)
    real = tmp_path / "elsewhere.jsonl"
    writer.log.rename(real)
    writer.log.symlink_to(real)
    before = tree(project)
    assert_error(sh(project, "status", "demo"), 1, "symlink")
    assert_error(sh(project, "unit", "demo", "c", "done"), 1, "symlink")
    assert tree(project) == before


def test_a_snapshot_the_seeds_store_wrote_since_is_kept(project: Path) -> None:
    """checkpoint.mjs writes the snapshot without the log (spec §1.9.2): the snapshot then matches
    no state of the chain. The seed's next append would replay the log over it and lose the write;
    resumable keeps the snapshot."""
    writer = seed_run(project, stale_by=0)
    snap = runs(project) / "demo.json"
    doc = json.loads(snap.read_text())
    doc["units"]["c"]["status"] = "blocked"
    snap.write_text(json.dumps(doc, indent=2) + "\n")
    assert status_json(project)["units"]["c"]["status"] == "blocked"
    ok(sh(project, "unit", "demo", "a", "done"))
    base = journal(project)[0]
    assert base["reason"] == "import" and "adoptedEventLog" not in base["doc"]
    assert writer.log.exists()


def test_a_missing_snapshot_is_rebuilt_from_the_log(project: Path) -> None:
    writer = seed_run(project, stale_by=0)
    (runs(project) / "demo.json").unlink()  # the seed crashed after its log's init, say
    assert status_json(project)["phases"]["build"]["status"] == "running"
    ok(sh(project, "unit", "demo", "c", "done"))
    assert journal(project)[0]["reason"] == "adopted demo.events.jsonl: no snapshot; rebuilt from its 5 events"
    assert json.loads((runs(project) / "demo.json").read_text())["units"]["c"]["status"] == "done"
    assert writer.log.exists()


def test_the_python_api_reads_the_adopted_document(project: Path) -> None:
    from resumable import read_doc

    seed_run(project, stale_by=2)
    doc = read_doc(runs(project) / "demo.json")
    assert doc["units"]["b"]["status"] == "done"
    assert not (runs(project) / "demo.journal.jsonl").exists()


def test_reset_and_gc_move_the_log_with_its_run(project: Path) -> None:
    writer = seed_run(project, stale_by=1)
    log_bytes = writer.log.read_bytes()
    ok(sh(project, "finalize", "demo", "aborted"))
    assert "1 archived" in ok(sh(project, "gc", ".ulpi/runs", "--keep-days", "0"))
    archived = runs(project) / "archive" / "demo.events.jsonl"
    assert archived.read_bytes() == log_bytes and not writer.log.exists()
    assert sh(project, "status", "demo").returncode == 3  # not brought back by a log left behind

    writer = seed_run(project, stale_by=1)
    out = ok(sh(project, "run", "--reset", "--job", "demo", "--dir", ".ulpi/runs"))
    assert "demo.events.jsonl (moved to" in out
    assert not writer.log.exists() and sh(project, "status", "demo").returncode == 3
    assert len(list((runs(project) / "archive").glob("demo*.events.jsonl"))) == 2


def test_without_a_log_a_load_costs_one_failed_lstat(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from resumable.store.files import layout, loader

    ok(sh(project, "init", ".ulpi/runs/plain.json", "--task", "t", "--units", "a"))
    files = layout.files_for(str(runs(project) / "plain.json"))
    seen: list[str] = []
    real = os.lstat

    def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).endswith(".events.jsonl"):
            seen.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counting)
    assert loader.load(files).doc is not None
    assert seen == [files.events]
    # ...and imports nothing for it (hashlib & co. stay out of a seed verb's start-up).
    code = ("import sys; from resumable.store.files.loader import read_doc; read_doc(sys.argv[1]);"
            " print(any(m.endswith(('ulpi_adoption', 'ulpi_eventlog')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(files.snapshot)], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_two_writers_that_both_saw_the_log_ahead_adopt_it_once(project: Path) -> None:
    from resumable import store
    from resumable.core import verbs

    seed_run(project, stale_by=2)
    snapshot = runs(project) / "demo.json"
    first, second = store.open_path(snapshot), store.open_path(snapshot)
    try:
        assert first.load() == second.load()  # both hold the adoption pending
        first.commit([verbs.unit("c", "in_progress")])
        second.commit([verbs.unit("c", "done")])
    finally:
        first.close()
        second.close()
    assert [e["t"] for e in journal(project)] == ["base", "unit", "unit"]
    assert status_json(project)["units"]["c"]["status"] == "done"


def test_a_long_lived_writer_notices_the_log_growing(project: Path) -> None:
    from resumable import store
    from resumable.core import verbs

    writer = seed_run(project, stale_by=0)
    handle = store.open_path(runs(project) / "demo.json")
    try:
        handle.commit([verbs.unit("c", "in_progress")])
        writer.doc = ulpi_eventlog.replay(writer.snapshot).doc  # the seed replays its log, appends,
        writer.transition("set", ["phases", "ship"], {"status": "done"}, snapshot=False)  # crashes
        handle.commit([verbs.unit("c", "done")])
    finally:
        handle.close()
    doc = status_json(project)
    assert doc["phases"]["ship"] == {"status": "done"} and doc["units"]["c"]["status"] == "done"
