"""Fixtures of the guard tests: a state directory of the test's own, an environment without the
default-directory variables, and a reaper for commands a killed guard leaves running."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("ONEX_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def reaper() -> Iterator[list[int]]:
    """Process groups to kill at the end of a test (commands a killed guard left running)."""
    groups: list[int] = []
    yield groups
    import signal

    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
