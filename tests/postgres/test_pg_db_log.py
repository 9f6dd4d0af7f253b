"""`resumable db log RUN STEP`: the stored log of a step's attempt, byte for byte, and a step that
printed nothing says so instead of printing nothing."""

from __future__ import annotations

from pathlib import Path

from pgtests import assert_error, base_env, cli, ok
from storecase import clean


def test_db_log_prints_the_log_and_says_when_it_is_empty(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "resumable.toml").write_text('[job]\nname = "lg"\n[steps.quiet]\nrun = "true"\n'
                                             '[steps.loud]\nrun = "printf \'a\\\\nb\'"\n')
    env = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("submit", env=env, cwd=tmp_path))
    ok(cli("worker", "--run", "lg", "-q", env=env, cwd=tmp_path, timeout=60))
    loud = cli("db", "log", "lg", "loud", env=env)
    assert (loud.returncode, loud.stdout, loud.stderr) == (0, "a\nb", "")
    quiet = cli("db", "log", "lg", "quiet", env=env)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "(empty log)\n", "")
    assert_error(cli("db", "log", "lg", "quiet", "--attempt", "9", env=env), 3, "no attempt 9 of step 'quiet'")
