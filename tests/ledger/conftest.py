"""Fixtures of the ledger tests: an isolated checkpoint root (HOME and ONEX_STATE_DIR point into the
test's directory, so nothing ever lands in a real home) and the API/CLI driver."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledgerhelpers import ApiDriver, CliDriver, Driver


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ONEX_STATE_DIR", raising=False)
    return home


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path / "ckpts"


@pytest.fixture(params=["api", "cli"])
def driver(request: pytest.FixtureRequest, base: Path, capsys: pytest.CaptureFixture[str]) -> Driver:
    return ApiDriver(base) if request.param == "api" else CliDriver(base, capsys)


