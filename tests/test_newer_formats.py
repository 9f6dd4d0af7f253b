"""A run a newer resumable wrote is refused in one line by every reader and writer, never misread.

The run document's ``schemaVersion`` (core.model.SCHEMA_VERSION) is what tells an older resumable
that the document may mean something it does not know: a state, a key, a container of another
shape. Reading it as this version's document could show a wrong picture or resume the wrong steps;
writing it could destroy what the newer version recorded. So: exit 1, one line saying to upgrade,
nothing changed on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import resumable
from corehelpers import assert_error, cli, journal_of, ok, tree
from resumable.core.model import SCHEMA_VERSION, newer_version, refuse_newer, shape_problem
from resumable.errors import NewerFormatError, exit_code_of
from resumable.store.files import journal, snapshot

NEWER = SCHEMA_VERSION + 5
MESSAGE = (f"run r has schemaVersion {NEWER}, newer than this resumable understands ({SCHEMA_VERSION});"
           " upgrade resumable")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def newer_run(runs: Path, how: str, *, status: str = "running") -> Path:
    """Run ``r`` as a newer resumable could leave it (``how``): its snapshot rewritten with a valid
    marker, its snapshot edited by hand, a seed-style file without a journal, or a journal whose
    last record (after the snapshot's) carries the newer document."""
    run = resumable.open_run("r", runs_dir=runs)
    run.init("task", units=["a", "b"])
    run.unit("a", "done")
    run.flush()
    run.close()
    path = runs / "r.json"
    doc: dict[str, Any] = json.loads(path.read_text())
    marker = doc.pop("_journal")
    doc["schemaVersion"] = NEWER
    doc["status"] = status
    if how == "snapshot":
        path.write_bytes(snapshot.encode(doc, marker["seq"], marker["offset"]))
    elif how == "edited":
        path.write_text(json.dumps(doc, indent=2))
    elif how == "seed":
        journal_of(run).unlink()
        path.write_text(json.dumps(doc, indent=2))
    else:
        assert how == "journal"
        with journal_of(run).open("ab") as f:
            f.write(journal.encode(marker["seq"] + 1, {"t": "base", "at": doc["updatedAt"], "reason": "import",
                                                       "doc": doc}))
    return path


HOW = ["snapshot", "edited", "seed", "journal"]


# --- the pure check -------------------------------------------------------------------------------


def test_newer_version_counts_numbers_and_digit_strings_only() -> None:
    assert newer_version({"schemaVersion": SCHEMA_VERSION}) is None
    assert newer_version({}) is None
    assert newer_version({"schemaVersion": 1}) is None
    assert newer_version({"schemaVersion": NEWER}) == NEWER
    assert newer_version({"schemaVersion": str(NEWER)}) == NEWER  # the seed left "2" a string
    assert newer_version({"schemaVersion": 2.5}) == 2.5
    for odd in (True, None, "x", "7.0", [7], {"v": 7}):
        assert newer_version({"schemaVersion": odd}) is None


def test_refuse_newer_names_the_run_and_says_upgrade() -> None:
    refuse_newer({"schemaVersion": SCHEMA_VERSION, "id": "r"})
    with pytest.raises(NewerFormatError) as info:
        refuse_newer({"schemaVersion": NEWER, "id": "r"})
    assert str(info.value) == MESSAGE
    assert exit_code_of(NewerFormatError) == 1
    with pytest.raises(NewerFormatError, match=r"^run other has"):
        refuse_newer({"schemaVersion": NEWER, "id": "r"}, "other")
    with pytest.raises(NewerFormatError, match=r"^run \? has schemaVersion 1(0){19}…, newer"):
        refuse_newer({"schemaVersion": 10**40})


def test_a_write_refuses_a_newer_document_before_judging_its_shape() -> None:
    """A newer format may shape its containers differently: the remedy is an upgrade, never "fix the
    document", so the version is checked first."""
    with pytest.raises(NewerFormatError, match="upgrade resumable"):
        shape_problem({"schemaVersion": NEWER, "id": "r", "units": [], "status": 3})
    assert shape_problem({"schemaVersion": 1.5, "units": {}}) == "'schemaVersion' is a number, not a whole number"


# --- the file store, through the CLI ----------------------------------------------------------------


@pytest.mark.parametrize("how", HOW)
def test_every_reader_refuses_a_newer_run(runs: Path, how: str) -> None:
    newer_run(runs, how)
    before = tree(runs)
    for args in (["status", "r"], ["status"], ["status", "r", "--units", "done"], ["get", "r"],
                 ["get", "r", "--summary"], ["resume", "r"], ["report", "r", "-o", "-"]):
        assert_error(cli(*args, runs=runs), 1, MESSAGE)
    # --json still prints the run's place and why, as for any unreadable run
    proc = cli("status", "r", "--json", runs=runs)
    assert proc.returncode == 1 and proc.stderr.strip() == f"resumable: {MESSAGE}"
    assert json.loads(proc.stdout)["error"] == MESSAGE
    proc = cli("status", "r", "--resume", runs=runs)
    assert proc.returncode == 1 and proc.stderr.strip() == f"resumable: {MESSAGE}"
    assert "UNREADABLE" in proc.stdout
    # a listing shows it as unreadable, and goes on
    listing = ok(cli("status", "--list", runs=runs))
    assert f"r.json (unreadable: {MESSAGE})" in listing
    assert tree(runs) == before


@pytest.mark.parametrize("how", HOW)
def test_every_writer_refuses_a_newer_run_and_changes_nothing(runs: Path, how: str) -> None:
    newer_run(runs, how)
    before = tree(runs)
    for args in (["unit", "r", "b", "done"], ["phase", "r", "p", "running"], ["item", "r", "--json", "{\"id\": \"x\"}"],
                 ["finalize", "r", "aborted"], ["rerun", "r", "a"]):
        line = assert_error(cli(*args, runs=runs), 1, MESSAGE)
        assert "fix the document" not in line
    assert tree(runs) == before


def test_init_does_not_archive_a_newer_finished_run(runs: Path) -> None:
    """A finished run is archived by an init over it; a newer run's "aborted" is not this
    version's to vouch for."""
    newer_run(runs, "snapshot", status="aborted")
    before = tree(runs)
    assert_error(cli("init", "r", "--task", "again", runs=runs), 1, MESSAGE)
    assert tree(runs) == before


def test_gc_leaves_a_newer_run_alone(runs: Path) -> None:
    newer_run(runs, "snapshot", status="done")
    before = tree(runs)
    assert ok(cli("gc", "--keep-days", "0", runs=runs)).startswith("0 archived")
    assert tree(runs) == before


def test_the_python_api_refuses_a_newer_run(runs: Path) -> None:
    path = newer_run(runs, "snapshot")
    before = tree(runs)
    with pytest.raises(NewerFormatError, match="upgrade resumable"):
        _ = resumable.open_run("r", runs_dir=runs).doc
    with pytest.raises(NewerFormatError, match="upgrade resumable"):
        resumable.read_doc(path)
    with pytest.raises(NewerFormatError, match="upgrade resumable"):
        resumable.open_run(str(path)).unit("b", "done")
    assert tree(runs) == before


def test_the_runner_refuses_a_newer_run(tmp_path: Path) -> None:
    (tmp_path / "resumable.toml").write_text(
        '[job]\nname = "r"\n[steps.a]\nrun = "echo a >> trace"\n[steps.b]\nrun = "echo b >> trace"\n'
        'needs = ["a"]\n')
    runs = tmp_path / "runs"
    ok(cli("run", "-q", runs=runs, cwd=tmp_path))
    path = runs / "r.json"
    doc = json.loads(path.read_text())
    marker = doc.pop("_journal")
    doc["schemaVersion"] = NEWER
    path.write_bytes(snapshot.encode(doc, marker["seq"], marker["offset"]))
    before = tree(runs)
    for args in (["run"], ["run", "--force"], ["run", "--dry-run"], ["run", "--status"]):
        assert_error(cli(*args, runs=runs, cwd=tmp_path), 1, MESSAGE)
    assert (tmp_path / "trace").read_text() == "a\nb\n"  # nothing ran again
    assert {k: v for k, v in tree(runs).items() if not k.endswith(".runner.lock")} == \
        {k: v for k, v in before.items() if not k.endswith(".runner.lock")}


# --- journal records ---------------------------------------------------------------------------------


def test_a_newer_journal_record_is_refused_naming_the_file(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs)
    run.init("task", units=["a"])
    run.close()
    import zlib

    head = b'{"v":%d,"seq":2,"t":"unit","unit":"a","shape":"of the future"' % (journal.FORMAT + 1)
    with journal_of(run).open("ab") as f:
        f.write(b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head)))
    before = tree(runs)
    for args in (["status", "r"], ["get", "r"], ["unit", "r", "a", "done"], ["log", "r"]):
        line = assert_error(cli(*args, runs=runs), 1, str(journal_of(run)), "written by a newer resumable",
                            "upgrade resumable")
        assert "corrupt" not in line
    assert tree(runs) == before
