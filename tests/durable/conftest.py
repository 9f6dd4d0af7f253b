"""Fixtures of the durable-step tests: a runs directory per test, and engines closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from resumable.durable import engine as engine_module


@pytest.fixture(autouse=True)
def _close_engines() -> Iterator[None]:
    yield
    engine_module._close_all()
    engine_module._ENGINES.clear()


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runs"
    monkeypatch.setenv("RESUMABLE_DIR", str(path))
    return path
