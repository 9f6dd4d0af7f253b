"""The PostgreSQL store is an optional extra: nothing of it is imported unless a PostgreSQL URL is
used (a runs directory never needs psycopg, and the help of its commands does not load it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pgtests import RESUMABLE, base_env


def imported(*args: str, env: dict[str, str]) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", RESUMABLE, *args], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.mark.parametrize("store", ["files"])  # needs no server
def test_a_runs_directory_never_loads_psycopg(store: str, tmp_path: Path) -> None:
    env = base_env(RESUMABLE_DIR=str(tmp_path / "runs"))
    for args in (["init", "r", "--task", "t", "--units", "a"], ["unit", "r", "a", "done"], ["get", "r"],
                 ["status", "r", "--no-color"], ["log", "r"], ["worker", "--help"], ["submit", "--help"],
                 ["db", "--help"], ["export", "--help"], ["import", "--help"]):
        mods = imported(*args, env=env)
        assert not {m for m in mods if m.split(".")[0] in ("psycopg", "psycopg_pool")}, args
        assert "resumable.store.postgres" not in mods, args
