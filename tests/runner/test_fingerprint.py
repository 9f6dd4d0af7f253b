from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.runner import fingerprint as fp
from resumable.runner.jobfile import Step


def _step(tmp_path: Path, **kw: object) -> Step:
    base: dict[str, object] = {"id": "s", "command": "true", "cwd": str(tmp_path)}
    base.update(kw)
    return Step(**base)  # type: ignore[arg-type]


def test_artifact_hash_only_when_size_or_mtime_differ(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    step = _step(tmp_path, artifacts=("out",))
    (tmp_path / "out").write_text("hello")
    recs = fp.artifact_records(step)
    calls = []
    real = fp.sha256_file
    monkeypatch.setattr(fp, "sha256_file", lambda p: calls.append(p) or real(p))
    assert fp.check_artifacts(step, recs).ok
    assert calls == []  # same size and mtime: no hashing
    os.utime(tmp_path / "out", ns=(1, 1))  # touched, same content
    assert fp.check_artifacts(step, recs).ok
    assert len(calls) == 1
    (tmp_path / "out").write_text("HELLO")
    assert fp.check_artifacts(step, recs).reason == "artifact changed: out"
    (tmp_path / "out").unlink()
    assert fp.check_artifacts(step, recs).reason == "artifact missing: out"


def test_fingerprint_changes(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("1")
    step = _step(tmp_path, inputs=("in.txt",), env=(("A", "1"),))
    stored = fp.fingerprint(step)
    assert fp.fingerprint_changes(step, stored) == []
    assert fp.fingerprint_changes(_step(tmp_path, command="false", inputs=("in.txt",),
                                        env=(("A", "1"),)), stored) == ["command changed"]
    assert fp.fingerprint_changes(_step(tmp_path, inputs=("in.txt",), env=(("A", "2"),)),
                                  stored) == ["env changed"]
    (tmp_path / "in.txt").write_text("2")
    assert fp.fingerprint_changes(step, stored) == ["input changed: in.txt"]
    (tmp_path / "in.txt").unlink()
    assert fp.fingerprint_changes(step, stored) == ["input missing: in.txt"]
    assert fp.fingerprint_changes(step, None) == ["fingerprint not recorded"]


@given(st.lists(st.text()))
def test_command_hash_is_the_json_hash_it_always_was(argv: list[str]) -> None:
    """The fast command hash must equal the stored form, or every done step would re-run."""
    try:
        expected = fp._sha(argv)
    except UnicodeEncodeError:  # a lone surrogate cannot be hashed either way
        return
    assert fp._argv_sha(argv) == expected
