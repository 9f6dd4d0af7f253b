"""A large run's digests as its snapshot's writer summed them up (store.files.summary): read by
status, get --summary and resume while the run is as that writer left it, and never after a write
or another program's edit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.store.files import digests, summary
from resumable.store.files.index import Index, digest
from resumable.store.files.layout import files_for
from resumable.store.files.loader import load


def _run(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    (runs / ".cache").mkdir(parents=True, mode=0o700)
    path = runs / "big.json"
    run = resumable.open_run(path)
    run.init("summed", units=[f"u{i}" for i in range(600)])
    run.unit("u1", "blocked", note="needs a human")
    run.unit("u2", "done")
    run.close()
    return path


def _same_as_whole(path: Path) -> None:
    full = load(files_for(path)).doc
    view = digests.load(files_for(path))
    assert full is not None and view is not None
    assert {k: v for k, v in view.doc.items() if k != "units"} == {k: v for k, v in full.items() if k != "units"}
    assert list(view.doc["units"]) == list(full["units"])
    assert {u: digest(v) for u, v in view.doc["units"].items()} == {u: digest(v) for u, v in full["units"].items()}
    assert view.units(["u1", "u599"]) == {u: full["units"][u] for u in ("u1", "u599")}


def _refuse_index_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    def no(*_a: Any) -> Any:
        raise AssertionError("read every digest line of the index")
    monkeypatch.setattr(Index, "digest_units", no)


def test_a_run_at_rest_is_read_from_its_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _run(tmp_path)
    assert summary.read(files_for(path)) is not None
    with monkeypatch.context() as m:
        _refuse_index_digests(m)
        _same_as_whole(path)


def test_a_write_or_an_edit_since_is_never_read_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _run(tmp_path)
    run = resumable.open_run(path)
    run.unit("u3", "failed")
    run.handle.writer.close()  # one write, as a CLI call makes it: the snapshot is not refreshed
    assert summary.read(files_for(path)) is None
    _same_as_whole(path)
    assert digests.load(files_for(path)).doc["units"]["u3"]["status"] == "failed"  # type: ignore[union-attr]
    # Written again and left at rest: summed up anew; then edited by another program (jq's way).
    run = resumable.open_run(path)
    run.unit("u4", "done")
    run.close()
    assert summary.read(files_for(path)) is not None
    snap = path.stat()
    other = path.with_name("edited.json")
    other.write_bytes(path.read_bytes().replace(b'"needs a human"', b'"edited by hand"'))
    os.utime(other, ns=(snap.st_atime_ns, snap.st_mtime_ns))
    os.replace(other, path)
    assert summary.read(files_for(path)) is None
