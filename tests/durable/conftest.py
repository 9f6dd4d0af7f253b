"""Fixtures of the durable-step tests: a runs directory per test, and engines closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable import api
from resumable.durable import engine as engine_module


@pytest.fixture(autouse=True)
def _close_engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close what a test opened (engines, and every Run it made), so descriptors do not pile up."""
    opened: list[resumable.Run] = []
    real = api.open_run

    def tracking(*args: Any, **kwargs: Any) -> resumable.Run:
        run = real(*args, **kwargs)
        opened.append(run)
        return run

    monkeypatch.setattr(api, "open_run", tracking)
    monkeypatch.setattr(resumable, "open_run", tracking, raising=False)
    yield
    engine_module._close_all()
    for run in opened:
        try:
            run.close()
        except resumable.ResumableError:
            pass


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runs"
    monkeypatch.setenv("RESUMABLE_DIR", str(path))
    return path
