"""The state file: the seed's keys and format, read by the seed's grep/awk, written atomically."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from resumable.errors import InvalidInputError
from resumable.guard import state

SEED_FILE = """# cron-closeout checkpoint — written by cron-closeout.sh [OMN-6887]
# Do not edit manually.
schema_version: "1.0.0"
pass_count: 5
last_status: failure
last_run_at: 2026-03-28T22:00:00Z
consecutive_failures: 2
dry_run: false
"""


def test_reads_a_file_the_seed_wrote() -> None:
    got = state.parse(SEED_FILE, "f", "cron-closeout")
    assert (got.pass_count, got.last_status, got.last_run_at, got.consecutive_failures, got.dry_run) == \
        (5, "failure", "2026-03-28T22:00:00Z", 2, False)


def test_the_seeds_reader_reads_ours(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    written = state.GuardState(pass_count=7, last_status="noop", last_run_at="2026-01-02T03:04:05Z",
                               consecutive_failures=1, last_exit_code=0)
    state.write(str(path), written, "job")
    for key, value in (("schema_version", '"1.0.0"'), ("pass_count", "7"), ("last_status", "noop"),
                       ("last_run_at", "2026-01-02T03:04:05Z"), ("consecutive_failures", "1"), ("dry_run", "false")):
        out = subprocess.run(["bash", "-c", f"grep '^{key}:' \"$1\" | awk '{{print $2}}'", "_", str(path)],
                             capture_output=True, text=True, check=True).stdout
        assert out == value + "\n"
    assert state.read(str(path), "job") == written
    import yaml

    assert yaml.safe_load(path.read_text())["pass_count"] == 7  # and it is YAML


@pytest.mark.parametrize("line", ["pass_count: many", "consecutive_failures: -1", "pass_count: 1e3"])
def test_values_the_seed_would_feed_to_shell_arithmetic_are_refused(line: str) -> None:
    with pytest.raises(InvalidInputError, match="not a whole number"):
        state.parse(line + "\n", "f", "job")


def test_a_newer_schema_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="newer resumable"):
        state.parse('schema_version: "2.0.0"\n', "f", "job")


def _pass(s: state.GuardState, status: str, code: int | None, at: str) -> state.GuardState:
    return state.after_pass(state.after_start(s, at), status, code, at)


def test_counting() -> None:
    s = state.GuardState()
    s = _pass(s, "failure", 1, "t1")
    s = _pass(s, "halt", 0, "t2")
    assert (s.pass_count, s.consecutive_failures, s.last_status) == (2, 2, "halt")
    s = _pass(s, "unknown", 0, "t3")  # neither a failure nor a success (the seed counted it)
    assert (s.pass_count, s.consecutive_failures) == (3, 2)
    s = state.after_halt(s, "t4")
    assert s.breaker_tripped_at == "t4" and s.pass_count == 3  # a refusal is not a pass
    s = _pass(s, "noop", 0, "t5")
    assert (s.consecutive_failures, s.breaker_tripped_at) == (0, "never")


def test_a_pass_is_counted_when_it_starts() -> None:
    """So that a guard killed mid-pass never loses the pass (and --max-passes is never overrun)."""
    begun = state.after_start(state.GuardState(pass_count=4, last_status="success", dry_run=True), "t1")
    assert (begun.pass_count, begun.pass_started_at, begun.unfinished, begun.last_status, begun.dry_run) == \
        (5, "t1", True, "success", False)
    ended = state.after_pass(begun, "failure", None, "t2")
    assert (ended.pass_count, ended.unfinished, ended.last_exit_code, ended.consecutive_failures) == (5, False, None, 1)
    assert state.parse(state.render(begun, "job", "/d").decode(), "f", "job") == begun


def test_a_dry_run_changes_only_dry_run() -> None:
    s = state.GuardState(pass_count=3, last_status="failure", last_run_at="t", consecutive_failures=3,
                         last_exit_code=1, breaker_tripped_at="t2")
    from dataclasses import replace

    assert state.after_dry_run(s) == replace(s, dry_run=True)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "hello: world\nfoo: 1\n", "garbage"])
def test_a_file_with_no_key_of_a_state_is_refused_not_read_as_fresh(text: str) -> None:
    """It was silently read as a fresh state, and the next pass wrote pass_count 1 over it."""
    with pytest.raises(InvalidInputError, match=r"^/s/job-state.yaml holds none of a guard state's keys "
                                                r"\(pass_count, .*\); fix /s/job-state.yaml or run `resumable guard "
                                                r"reset job --all --state-dir /s`$"):
        state.parse(text, "/s/job-state.yaml", "job")
    assert state.parse("dry_run: false\n", "f", "job") == state.GuardState()  # one key is enough


def test_the_reset_line_quotes_the_state_directory() -> None:
    assert state.reset_command("job", "/a b/$x") == "resumable guard reset job --state-dir '/a b/$x'"
    assert state.reset_command("job", "/s", everything=True) == "resumable guard reset job --all --state-dir /s"


def test_the_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from resumable import fsio

    path = tmp_path / "s.yaml"
    state.write(str(path), state.GuardState(pass_count=1), "job")
    before = path.read_bytes()

    def full(op: str, where: str) -> None:
        if op == "write":
            raise OSError(errno.ENOSPC, "No space left on device", where)

    previous = fsio.set_fault_hook(full)
    try:
        with pytest.raises(Exception, match="no space left"):
            state.write(str(path), state.GuardState(pass_count=2), "job")
    finally:
        fsio.set_fault_hook(previous)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]
