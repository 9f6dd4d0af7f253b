"""Nothing planted in the checkpoint tree is followed, read or written through. A symlink in place
of the ticket directory, or of the run directory a command names, is refused with one line; a
planted entry under a checkpoint's name (a directory, a FIFO, a link) is skipped as a corrupt
attempt, with a warning, and counted for the next attempt number, so that it blocks neither the
other attempts nor the other runs of the ticket; so is a planted run directory in a listing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from ledgerhelpers import PAYLOADS, RUN, cli, document, run_cli, run_dir

from resumable import ledger
from resumable.ledger import yamlfmt

OTHER_RUN = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
COMMON = ("--ticket-id", "OMN-2143", "--run-id", RUN)
WRITE = ("write", *COMMON, "--phase", "implement", "--payload", json.dumps(PAYLOADS["implement"]), "--strict")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the root, holding a valid-looking checkpoint."""
    target = tmp_path / "outside"
    target.mkdir()
    (target / "phase_1_implement_a1.yaml").write_bytes(yamlfmt.dump(document()))
    return target


def _targeted_commands() -> list[tuple[str, ...]]:
    return [WRITE, ("read", *COMMON, "--phase", "implement"), ("validate", *COMMON, "--phase", "implement"),
            ("resume-point", *COMMON)]


def _assert_refused(base: Path, capsys: pytest.CaptureFixture[str], commands: list[tuple[str, ...]],
                    fragment: str) -> None:
    for args in commands:
        code, out, err = cli(capsys, *args, base=base)
        assert code == 1, (args, out, err)
        assert json.loads(out)["success"] is False
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("resumable: ") and "refused" in lines[0], (args, err)
        assert fragment in lines[0]


def test_a_symlinked_run_directory_is_refused_and_skipped_in_listings(
        base: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger.write_checkpoint(document(run=OTHER_RUN), base_dir=base)
    (base / "OMN-2143" / RUN).symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    _assert_refused(base, capsys, _targeted_commands(), "is a symbolic link")
    # the ticket's other run is still listed; the link is named, never followed
    code, out, _ = cli(capsys, "list", "--ticket-id", "OMN-2143", base=base)
    listed = json.loads(out)
    assert code == 0 and listed["count"] == 1 and listed["checkpoints"][0]["run_id"] == OTHER_RUN
    assert listed["warnings"] == [f"Skipping OMN-2143/{RUN}: a symbolic link, not a run directory: not followed or "
                                  "read (remove it)"]
    code, out, _ = cli(capsys, "show", "OMN-2143", base=base)
    assert code == 0 and f"run {RUN}  SKIPPED: a symbolic link" in out and f"run {OTHER_RUN}  first written" in out
    assert sorted(p.name for p in outside.iterdir()) == before  # nothing written through the link


def test_a_fifo_named_like_a_run_directory_hides_no_other_run(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger.write_checkpoint(document(run=OTHER_RUN), base_dir=base)
    os.mkfifo(base / "OMN-2143" / RUN)
    proc = run_cli("checkpoint", "list", "--base-dir", str(base), "--ticket-id", "OMN-2143", timeout=20)
    assert proc.returncode == 0 and json.loads(proc.stdout)["count"] == 1
    assert "a FIFO, not a run directory" in proc.stdout
    _assert_refused(base, capsys, _targeted_commands(), "is a FIFO")


def test_a_symlinked_ticket_directory_is_refused(base: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    base.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (base / "OMN-2143").symlink_to(tmp_path / "elsewhere")
    _assert_refused(base, capsys, [*_targeted_commands(), ("list", "--ticket-id", "OMN-2143")], "is a symbolic link")
    code, out, err = cli(capsys, "show", "OMN-2143", base=base)
    assert code == 1 and out == "" and len(err.splitlines()) == 1 and "refused" in err
    assert list((tmp_path / "elsewhere").iterdir()) == []


def _plant(path: Path, kind: str, outside: Path) -> None:
    if kind == "symlink":
        path.symlink_to(outside / "phase_1_implement_a1.yaml")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_a_planted_entry_named_like_a_checkpoint_is_a_corrupt_attempt(
        kind: str, base: Path, outside: Path) -> None:
    """It blocked read, list, show, resume-point and write for every run of the ticket."""
    ledger.write_checkpoint(document(), base_dir=base)  # a1, valid
    ledger.write_checkpoint(document(run=OTHER_RUN), base_dir=base)
    planted = run_dir(base) / "phase_1_implement_a2.yaml"
    _plant(planted, kind, outside)
    described = {"directory": "a directory", "fifo": "a FIFO", "symlink": "a symbolic link"}[kind]
    problem = f"{described}, not a checkpoint file: not followed or read (remove it)"
    rel = f"OMN-2143/{RUN}/phase_1_implement_a2.yaml"

    def checkpoint(*args: str) -> tuple[int, dict[str, object], str]:
        proc = run_cli("checkpoint", args[0], "--base-dir", str(base), *args[1:], timeout=20)  # a FIFO never blocks
        assert "Traceback" not in proc.stderr
        return proc.returncode, json.loads(proc.stdout), proc.stderr

    code, read, _ = checkpoint("read", *COMMON, "--phase", "implement")
    assert code == 0 and read["checkpoint"]["attempt_number"] == 1  # type: ignore[index]
    assert read["warnings"] == [f"Skipped corrupt checkpoint file {rel}: {problem}"]
    code, listed, _ = checkpoint("list", "--ticket-id", "OMN-2143")
    assert code == 0 and listed["count"] == 2
    assert listed["warnings"] == [f"Skipping corrupt checkpoint {rel}: {problem}"]
    code, point, _ = checkpoint("resume-point", *COMMON)
    assert code == 0 and point["resume_phase"] == "local_review"
    code, valid, _ = checkpoint("validate", *COMMON, "--phase", "implement")
    assert code == 0 and valid["is_valid"] is True
    show = run_cli("checkpoint", "show", "OMN-2143", "--base-dir", str(base), timeout=20)
    assert show.returncode == 0 and f"a2       CORRUPT                        {problem}" in show.stdout
    # the next write steps over the planted attempt number, and never writes through it
    code, wrote, _ = checkpoint(*WRITE)
    assert code == 0 and wrote["checkpoint_path"] == f"OMN-2143/{RUN}/phase_1_implement_a3.yaml"
    code, refused, err = checkpoint(*WRITE, "--attempt", "2")
    assert code == 1 and "Checkpoint already exists: phase_1_implement_a2.yaml" in str(refused["error"])
    assert err.count("\n") == 1
    mode = os.lstat(planted).st_mode
    assert {"directory": stat.S_ISDIR, "fifo": stat.S_ISFIFO, "symlink": stat.S_ISLNK}[kind](mode)
    assert sorted(p.name for p in outside.iterdir()) == ["phase_1_implement_a1.yaml"]
    assert (outside / "phase_1_implement_a1.yaml").read_bytes() == yamlfmt.dump(document())


def test_only_a_planted_attempt_is_a_corrupt_read(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir(base).mkdir(parents=True)
    os.mkfifo(run_dir(base) / "phase_1_implement_a1.yaml")
    code, out, err = cli(capsys, "read", *COMMON, "--phase", "implement", base=base)
    assert code == 1 and json.loads(out)["error"] == (
        f"Corrupt checkpoint file OMN-2143/{RUN}/phase_1_implement_a1.yaml: a FIFO, not a checkpoint file: "
        "not followed or read (remove it)")
    assert err.count("\n") == 1 and err.startswith("resumable: Corrupt checkpoint file")


def test_a_fifo_swapped_in_after_the_scan_is_skipped_at_open(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan saw a regular file; by the time it is opened it is a FIFO: O_NONBLOCK + fstat see it,
    and it is skipped like any planted attempt, never read."""
    from resumable.ledger import store

    ledger.write_checkpoint(document(), base_dir=base)
    real_load = store.load

    def swap_then_load(run_fd: int, *args: object) -> object:
        path = run_dir(base) / "phase_1_implement_a1.yaml"
        path.unlink()
        os.mkfifo(path)
        return real_load(run_fd, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "load", swap_then_load)
    result = ledger.read("OMN-2143", RUN, "implement", base_dir=base)
    assert not result.success and result.error is not None and "a FIFO, not a checkpoint file" in result.error


def test_other_names_in_a_run_directory_are_ignored(base: Path) -> None:
    ledger.write_checkpoint(document(), base_dir=base)
    (run_dir(base) / "notes.txt").write_text("x")
    os.mkfifo(run_dir(base) / "a-fifo")
    (run_dir(base) / "not-a-run").mkdir()
    (base / "OMN-2143" / "not-a-uuid").mkdir()
    result = ledger.list_checkpoints("OMN-2143", base_dir=base)
    assert result.count == 1 and result.warnings == ()
