"""The suite never writes into the real user's state directory: a worker started the way the tests
start one keeps its step logs in the suite's own state directory (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from pgtests import base_env, cli, ok
from storecase import clean

from resumable.store.postgres.backend import PgBackend


def test_a_worker_run_leaves_the_real_state_directory_untouched(pg_url: str, tmp_path: Path,
                                                                 real_state_home: Path,
                                                                 suite_state_home: Path) -> None:
    clean(pg_url)
    name = Path(PgBackend(pg_url).local_dir()).name  # pg-<hash of the URL>: this database's directory
    real = real_state_home / "resumable" / name
    assert not real.exists()
    (tmp_path / "resumable.toml").write_text('[job]\nname = "st"\n[steps.a]\nrun = "echo logged"\n')
    env = base_env(RESUMABLE_STORE=pg_url)  # the environment tests hand to the processes they start
    ok(cli("submit", env=env, cwd=tmp_path))
    ok(cli("worker", "--run", "st", "-q", env=env, cwd=tmp_path, timeout=60))
    assert not real.exists()
    logs = list((suite_state_home / "resumable" / name / "st" / "logs").iterdir())
    assert [p.name for p in logs] == ["a.1.log"] and logs[0].read_text() == "logged\n"
