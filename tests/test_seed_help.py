"""Every seed verb's --help lists its arguments and options as the verb takes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from corehelpers import cli, ok
from resumable.cli.lowlevel import OPTIONS

USAGE = {
    "init": "Usage: resumable init <run> --task TEXT",
    "unit": "Usage: resumable unit <run> <unit> <state>",
    "phase": "Usage: resumable phase <run> <phase> <state>",
    "get": "Usage: resumable get <run> [--summary]",
    "resume": "Usage: resumable resume <run>",
    "item": "Usage: resumable item <run> --json OBJECT|ARRAY",
    "resolve": "Usage: resumable resolve <run> (--ids a,b | --json ARRAY)",
    "validation": "Usage: resumable validation <run> <status>",
    "finalize": "Usage: resumable finalize <run> <status>",
    "gc": "Usage: resumable gc [<runs-dir>] [--keep-days N]",
}


@pytest.mark.parametrize("verb", sorted(OPTIONS))
def test_help_lists_arguments_and_every_option(verb: str, tmp_path: Path) -> None:
    out = ok(cli(verb, "--help", cwd=tmp_path))
    assert out.startswith(USAGE[verb])
    assert "Arguments:\n  <" in out and "[OPTIONS]" not in out
    values, flags = OPTIONS[verb]
    for option in (*values, *flags):
        assert f"\n  {option}" in out, option  # every option the verb's parser takes is listed
    assert not list(tmp_path.iterdir())


def test_a_bad_state_names_the_states_not_a_missing_id(tmp_path: Path) -> None:
    r = cli("unit", "r", "a", "bogus", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr == ("resumable: unknown unit state 'bogus'; the states are pending, in_progress, done,"
                        " blocked, dep_blocked, failed, timeout, interrupted\n")
    assert not list(tmp_path.iterdir())
