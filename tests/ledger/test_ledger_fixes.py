"""Every defect of the seed's checkpoint tools (§2.10 #1-#9) as a test that fails without its fix.
(#10, cron-closeout, is in tests/guard.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from ledgerhelpers import PAYLOADS, RUN, cli, document, plant, run_dir

from resumable import ledger
from resumable.errors import DiskFullError, InvalidInputError, RefusedError
from resumable.ledger import yamlfmt

# --- #1 documentation vs code ------------------------------------------------------------------


def test_default_base_is_where_the_seed_writes(isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "write", "--ticket-id", "T-1", "--run-id", "r", "--phase", "implement",
                       "--payload", json.dumps(PAYLOADS["implement"]))
    assert code == 0 and json.loads(out)["success"]
    assert len(list((isolated_home / ".claude" / "checkpoints" / "T-1").rglob("*.yaml"))) == 1


def test_onex_state_dir_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEX_STATE_DIR", str(tmp_path / "state"))
    result = ledger.write("T-1", "r", "implement", PAYLOADS["implement"])
    assert (tmp_path / "state" / "checkpoints" / result.checkpoint_path).is_file()


def test_all_five_phases_with_their_ordinals(base: Path) -> None:
    names = [ledger.write("T", "r", p, PAYLOADS[p], base_dir=base).checkpoint_path.rsplit("/", 1)[1]
             for p in PAYLOADS]
    assert names == ["phase_1_implement_a1.yaml", "phase_2_local_review_a1.yaml", "phase_3_create_pr_a1.yaml",
                     "phase_4_pr_release_ready_a1.yaml", "phase_5_ready_for_merge_a1.yaml"]


@pytest.mark.parametrize("verb", ["write", "read", "validate"])
def test_an_invalid_phase_is_a_json_error_listing_the_valid_ones(verb: str, base: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, verb, "--ticket-id", "T", "--run-id", "r", "--phase", "deploy", base=base)
    data = json.loads(out)
    assert data["success"] is False
    assert data["error"] == ("Invalid phase: deploy. Valid: ['implement', 'local_review', 'create_pr', "
                             "'pr_release_ready', 'ready_for_merge']")
    assert code == (0 if verb == "write" else 1)
    assert err.startswith("resumable: Invalid phase") and "Usage" not in err
    if verb == "validate":
        assert data["is_valid"] is False


def test_a_failed_write_exits_0_unless_strict(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--payload", "{}")
    code, out, err = cli(capsys, *args, base=base)
    assert code == 0 and json.loads(out)["success"] is False and err.startswith("resumable: Write failed")
    code, out, _ = cli(capsys, *args, "--strict", base=base)
    assert code == 1 and json.loads(out)["success"] is False


# --- #2 attempt numbering ----------------------------------------------------------------------


def test_omitted_attempt_takes_the_next_free_number_counting_corrupt_files(base: Path) -> None:
    plant(base, "phase_1_implement_a1.yaml", ": : [corrupt")
    result = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert result.attempt_number == 2 and result.checkpoint_path.endswith("phase_1_implement_a2.yaml")
    # and keeps working: the seed's count+1 would pick 2 again and fail forever
    result = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert result.attempt_number == 3


def test_omitted_attempt_steps_over_gaps(base: Path) -> None:
    ledger.write("OMN-2143", "r", "implement", PAYLOADS["implement"], attempt=5, base_dir=base)
    assert ledger.write("OMN-2143", "r", "implement", PAYLOADS["implement"], base_dir=base).attempt_number == 6
    # other phases count on their own
    assert ledger.write("OMN-2143", "r", "create_pr", PAYLOADS["create_pr"], base_dir=base).attempt_number == 1


def test_the_attempt_in_the_file_is_the_one_claimed(base: Path) -> None:
    plant(base, "phase_1_implement_a1.yaml", "junk: [")
    result = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    stored = ledger.read("OMN-2143", "a1b2c3d4", "implement", base_dir=base).checkpoint
    assert stored is not None and stored.attempt_number == result.attempt_number == 2


def test_a_claim_lost_to_another_writer_moves_to_the_next_number(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the scan and the link another writer takes the number: the link fails (EEXIST) and the
    write retries with the next number instead of failing (the seed's loser lost its checkpoint)."""
    from resumable.ledger import writer

    real_scan = writer.scan  # type: ignore[attr-defined]
    calls = {"n": 0}

    def scan_then_race(run_fd: int, where: str, prefix: str = "phase_") -> object:
        result = real_scan(run_fd, where, prefix)
        calls["n"] += 1
        if calls["n"] == 1:  # a rival links attempt 1 right after our first scan
            plant(base, "phase_1_implement_a1.yaml", yamlfmt.dump(document()))
        return result

    monkeypatch.setattr(writer, "scan", scan_then_race)
    result = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert result.attempt_number == 2 and calls["n"] == 2


def test_a_given_attempt_that_is_taken_is_refused(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plant(base, "phase_1_implement_a1.yaml", ": corrupt")
    code, out, _ = cli(capsys, "write", "--ticket-id", "OMN-2143", "--run-id", "a1b2c3d4", "--phase", "implement",
                       "--attempt", "1", "--payload", json.dumps(PAYLOADS["implement"]), base=base)
    data = json.loads(out)
    assert code == 0 and data["success"] is False
    assert "Checkpoint already exists: phase_1_implement_a1.yaml" in data["error"]
    assert "increment attempt_number" in data["error"]
    assert (run_dir(base) / "phase_1_implement_a1.yaml").read_text() == ": corrupt"


# --- #3 read falls back to the newest valid attempt --------------------------------------------


def test_read_falls_back_past_a_corrupt_newest_attempt(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger.write_checkpoint(document(attempt=1), base_dir=base)
    plant(base, "phase_1_implement_a2.yaml", "{{{")
    plant(base, "phase_1_implement_a3.yaml", yamlfmt.dump(document(attempt=4)))  # says it is a4: not a3
    code, out, _ = cli(capsys, "read", "--ticket-id", "OMN-2143", "--run-id", RUN, "--phase", "implement", base=base)
    data = json.loads(out)
    assert code == 0 and data["success"] is True and data["checkpoint"]["attempt_number"] == 1
    assert len(data["warnings"]) == 2
    assert "phase_1_implement_a3.yaml" in data["warnings"][0] and "phase_1_implement_a4.yaml" in data["warnings"][0]
    assert "phase_1_implement_a2.yaml: invalid YAML" in data["warnings"][1]


def test_validate_reports_the_skipped_attempts_too(base: Path) -> None:
    ledger.write_checkpoint(document(attempt=1), base_dir=base)
    plant(base, "phase_1_implement_a2.yaml", "")
    result = ledger.validate_stored("OMN-2143", RUN, "implement", base_dir=base)
    assert result.is_valid and any("a2.yaml" in w for w in result.warnings)


# --- #4 list order and no cap ------------------------------------------------------------------


def test_list_orders_runs_by_first_write_then_phase_then_attempt(base: Path) -> None:
    # runs whose ids sort opposite to their write order; phases written last-first; attempts 10 and 2
    late, early = "ffffffff-0000-5000-8000-000000000000", "00000000-0000-5000-8000-000000000000"
    for run in (late, early):
        for phase in ("create_pr", "implement"):
            for attempt in (10, 2):
                ledger.write("OMN-2143", run, phase, PAYLOADS[phase], attempt=attempt, base_dir=base)
        time.sleep(0.01)
    os.utime(run_dir(base, run=late) / "phase_3_create_pr_a10.yaml", ns=(1, 1))  # its first write
    listed = [(str(c.run_id), c.phase, c.attempt_number)
              for c in ledger.list_checkpoints("OMN-2143", base_dir=base).checkpoints]
    order = [(run, phase, attempt) for run in (late, early) for phase in ("implement", "create_pr")
             for attempt in (2, 10)]
    assert listed == order


def test_list_has_no_cap(base: Path) -> None:
    data = yamlfmt.dump(document())
    for i in range(1001):  # the seed stopped at 1000 run directories
        run = f"00000000-0000-5000-8000-{i:012d}"
        plant(base, "phase_1_implement_a1.yaml", data.replace(RUN.encode(), run.encode()), run=run)
    assert ledger.list_checkpoints("OMN-2143", base_dir=base).count == 1001


# --- #5 crash leftovers and durability ----------------------------------------------------------


def _temp(base: Path, name: str, age_s: float) -> Path:
    path = plant(base, name, "half a checkpoint")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_orphaned_temp_files_are_swept_by_the_next_write(base: Path) -> None:
    old = _temp(base, ".ckpt_dead.tmp", 3600)
    fresh = _temp(base, ".ckpt_young.tmp", 5)
    ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert not old.exists()
    assert fresh.exists()  # may belong to a writer that is still running


def test_an_old_temp_file_a_live_writer_holds_is_not_swept(base: Path) -> None:
    import fcntl

    held = _temp(base, ".ckpt_slow.tmp", 3600)
    with open(held, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # what a writer does from creating its temp to unlinking it
        ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
        assert held.exists()


def test_a_temp_name_that_is_not_a_file_is_left_alone(base: Path) -> None:
    run_dir(base).mkdir(parents=True)
    target = base / "victim"
    target.write_text("keep")
    (run_dir(base) / ".ckpt_link.tmp").symlink_to(target)
    os.utime(run_dir(base) / ".ckpt_link.tmp", (1, 1), follow_symlinks=False)
    ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert (run_dir(base) / ".ckpt_link.tmp").is_symlink() and target.read_text() == "keep"


@pytest.mark.parametrize("fresh_dirs", [True, False])
def test_a_write_leaves_no_temp_file_and_fsyncs_the_directory_last(fresh_dirs: bool, base: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if not fresh_dirs:
        ledger.write("OMN-2143", "a1b2c3d4", "create_pr", PAYLOADS["create_pr"], base_dir=base)
    synced: list[int] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def record(fd: int, real: object = real) -> None:
            synced.append(os.fstat(fd).st_ino)
            real(fd)  # type: ignore[operator]

        monkeypatch.setattr(os, name, record)
    result = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    # the data first, the run directory last (so the new name survives a power cut)
    assert synced[-1] == run_dir(base).stat().st_ino
    assert (base / result.checkpoint_path).stat().st_ino in synced[:-1]
    assert not [p.name for p in run_dir(base).iterdir() if p.name.startswith(".ckpt_")]


def test_a_writers_own_temp_file_is_never_swept(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer sweeping while ours is between writing its temp file and linking it (and the
    temp file looks old) must leave it alone: the writer holds a lock on it."""
    from resumable.ledger import writer

    real_fill = writer._fill
    swept: list[list[str]] = []

    def fill_then_rival_sweeps(fd: int, data: bytes, path: str) -> None:
        real_fill(fd, data, path)
        temps = [p.name for p in run_dir(base).iterdir() if p.name.startswith(".ckpt_")]
        for name in temps:
            os.utime(run_dir(base) / name, (1, 1))
        dir_fd = os.open(run_dir(base), os.O_RDONLY | os.O_DIRECTORY)
        try:
            swept.append(writer.sweep(dir_fd, temps))
        finally:
            os.close(dir_fd)

    monkeypatch.setattr(writer, "_fill", fill_then_rival_sweeps)
    result = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert swept == [[]] and result.success


def test_a_failed_write_leaves_nothing_behind(base: Path) -> None:
    import errno

    from resumable import fsio

    def full(op: str, path: str) -> None:
        if op == "write":
            raise OSError(errno.ENOSPC, "No space left on device", path)

    previous = fsio.set_fault_hook(full)
    try:
        with pytest.raises(DiskFullError, match="no space left"):
            ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    finally:
        fsio.set_fault_hook(previous)
    assert list(run_dir(base).iterdir()) == []


def test_without_hard_links_writes_still_never_clobber(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    second = ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], base_dir=base)
    assert (first.attempt_number, second.attempt_number) == (1, 2)
    with pytest.raises(RefusedError, match="already exists"):
        ledger.write("OMN-2143", "a1b2c3d4", "implement", PAYLOADS["implement"], attempt=1, base_dir=base)
    assert ledger.read("OMN-2143", "a1b2c3d4", "implement", base_dir=base).checkpoint is not None
    assert sorted(p.name for p in run_dir(base).iterdir()) == ["phase_1_implement_a1.yaml", "phase_1_implement_a2.yaml"]


# --- #6 ticket ids and HOME --------------------------------------------------------------------

BAD_TICKETS = ["a/b", ".", "..", "", "x" * 65, "a b", "../../etc", "/abs", "t\x00", "t\n", "tïcket"]


@pytest.mark.parametrize("ticket", BAD_TICKETS)
def test_bad_ticket_ids_are_refused_everywhere(ticket: str, base: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="Invalid ticket_id"):
        ledger.write(ticket, "r", "implement", PAYLOADS["implement"], base_dir=base)
    with pytest.raises(InvalidInputError, match="Invalid ticket_id"):
        ledger.write_checkpoint(document(ticket=ticket), base_dir=base)
    with pytest.raises(InvalidInputError, match="Invalid ticket_id"):
        ledger.read(ticket, "r", "implement", base_dir=base)
    with pytest.raises(InvalidInputError, match="Invalid ticket_id"):
        ledger.list_checkpoints(ticket, base_dir=base)
    assert not base.exists()


def test_good_ticket_ids(base: Path) -> None:
    for ticket in ("OMN-2143", "a", "x" * 64, "v1.2_rc-3", "..."):
        assert ledger.write(ticket, "r", "implement", PAYLOADS["implement"], base_dir=base).success


def test_home_is_read_at_each_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("first", "second"):
        monkeypatch.setenv("HOME", str(tmp_path / name))
        ledger.write("T", "r", "implement", PAYLOADS["implement"])
        assert (tmp_path / name / ".claude" / "checkpoints" / "T").is_dir()


# --- #7 the validator and the model agree -------------------------------------------------------


@pytest.mark.parametrize("sha", ["abc", "a" * 41, "ABCDEF1", "g123456", "", "a1b2c3d ", "a1b2c3d"])
def test_write_accepts_exactly_what_validate_accepts(sha: str, base: Path) -> None:
    doc = document(repo_commit_map={"r": sha})
    valid = ledger.validate(doc).is_valid
    try:
        ledger.write_checkpoint(doc, base_dir=base)
        written = True
    except InvalidInputError:
        written = False
    assert written is valid is (sha == "a1b2c3d")


def test_payload_shas_follow_the_same_rule(base: Path) -> None:
    for sha, ok in (("a1b2c3d", True), ("abc", False), ("A1B2C3D", False), ("f" * 40, True), ("f" * 41, False)):
        payload = {**PAYLOADS["implement"], "commit_sha": sha}
        assert ledger.validate(document(phase_payload={"phase": "implement", **payload})).is_valid is ok
        try:
            ledger.write("T", "r", "implement", payload, base_dir=base)
            assert ok
        except InvalidInputError as exc:
            assert not ok and "Invalid commit SHA for phase_payload.commit_sha" in str(exc)


# --- #8 and #9: error types and JSON shapes ----------------------------------------------------


def test_read_of_an_invalid_phase_raises_the_packages_error() -> None:
    with pytest.raises(InvalidInputError, match="Invalid phase: deploy"):
        ledger.read("T", "r", "deploy")


@pytest.mark.parametrize("args", [
    ("validate", "--ticket-id", "../x", "--run-id", "r", "--phase", "implement"),
    ("validate", "--ticket-id", "T", "--run-id", "r", "--phase", "implement"),
    ("validate", "--ticket-id", "T", "--run-id", "r", "--phase", "nope"),
    ("validate", "--ticket-id", "OMN-2143", "--run-id", RUN, "--phase", "implement", "--root", "/nonexistent"),
])
def test_validate_always_says_is_valid_and_success(args: tuple[str, ...], base: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ledger.write_checkpoint(document(), base_dir=base)
    code, out, _ = cli(capsys, *args, base=base)
    data = json.loads(out)
    assert data["is_valid"] is False and data["success"] is False and code == 1


@pytest.mark.parametrize("args", [
    ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--payload", "[1]"),
    ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--payload", "{bad json"),
    ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--repo-commit-map", "[]"),
    ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--artifact-paths", "{}"),
    ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--attempt", "two"),
    ("write", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", "--timestamp", "2026-01-01T00:00:00"),
    ("read", "--ticket-id", "T", "--run-id", "r", "--phase", "implement"),
    ("read", "--ticket-id", "a/b", "--run-id", "r", "--phase", "implement"),
    ("list", "--ticket-id", "a/b"),
    ("list", "--ticket-id", "T"),
    ("resume-point", "--ticket-id", "a/b", "--run-id", "r"),
])
def test_every_json_answer_says_success(args: tuple[str, ...], base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, err = cli(capsys, *args, base=base)
    data = json.loads(out)
    assert isinstance(data["success"], bool)
    assert "Traceback" not in err and len(err.splitlines()) <= 1
    if not data["success"]:  # a "not found" read too: one line on stderr, as every failure
        assert data["error"] and err == f"resumable: {data['error']}\n"


def test_naive_timestamps_are_refused_with_the_seeds_message(base: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"timestamp_utc must be timezone-aware \(use datetime.now\(UTC\)\)"):
        ledger.write("T", "r", "implement", PAYLOADS["implement"], timestamp="2026-01-01T00:00:00", base_dir=base)


def test_stderr_never_carries_control_characters_from_arguments(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "read", "--ticket-id", "T", "--run-id", "r", "--phase", "\x1b[2Jboom", base=base)
    assert code == 1 and "\x1b" not in err and "\\x1b[2Jboom" in err
    assert json.loads(out)["error"].startswith("Invalid phase: \x1b[2Jboom")  # JSON escapes it itself
