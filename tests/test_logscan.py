"""A run's logs directory, found clean of planted links, is not listed again while its mtime and
ctime hold (store.files.layout): a link planted since is still refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resumable.errors import StoreError
from resumable.store.files import layout


def _logs(tmp_path: Path) -> Path:
    logs = tmp_path / "runs" / "r1" / "logs"
    logs.mkdir(parents=True)
    (tmp_path / "runs" / ".cache").mkdir(mode=0o700)
    (logs / "a.1.log").write_text("x\n")
    return logs


def test_a_clean_listing_is_kept_and_a_link_planted_since_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _logs(tmp_path)
    monkeypatch.setattr(layout, "_SETTLED_NS", -(10**18))  # the test cannot wait for mtimes to settle
    runs = str(tmp_path / "runs")
    layout.check_log_dir(runs, "r1", create=False)
    assert len(list((tmp_path / "runs" / ".cache").glob("logscan.*"))) == 1

    def no_listing(*_a: object) -> None:
        raise AssertionError("listed again")
    with monkeypatch.context() as m:
        m.setattr(os, "scandir", no_listing)
        layout.check_log_dir(runs, "r1", create=False)  # kept: not listed
    os.symlink("/etc/passwd", logs / "b.1.log")
    with pytest.raises(StoreError, match="symbolic link"):
        layout.check_log_dir(runs, "r1", create=False)
    os.unlink(logs / "b.1.log")
    layout.check_log_dir(runs, "r1", create=False)
    os.mkfifo(logs / "c.1.log")  # not a link, not a regular file: refused too
    with pytest.raises(StoreError):
        layout.check_log_dir(runs, "r1", create=False)


def test_a_directory_changed_a_moment_ago_is_listed_every_time(tmp_path: Path) -> None:
    _logs(tmp_path)
    layout.check_log_dir(str(tmp_path / "runs"), "r1", create=False)
    assert list((tmp_path / "runs" / ".cache").glob("logscan.*")) == []
