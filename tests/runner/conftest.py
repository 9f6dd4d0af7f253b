"""The runner tests' fixture; their helpers are in runnerhelpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean working directory with its own runs directory; grace periods kept short."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RESUMABLE_DIR", str(tmp_path / "runs"))
    return tmp_path
