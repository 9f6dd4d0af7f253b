"""Nothing planted in the checkpoint tree is followed, read or written through: a symlink or FIFO
where a ticket directory, run directory or checkpoint file should be is refused with one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ledgerhelpers import PAYLOADS, RUN, cli, document, run_cli, run_dir

from resumable import ledger
from resumable.errors import StoreError
from resumable.ledger import yamlfmt


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the root, holding a valid-looking checkpoint."""
    target = tmp_path / "outside"
    target.mkdir()
    (target / "phase_1_implement_a1.yaml").write_bytes(yamlfmt.dump(document()))
    return target


def _all_commands(base: Path) -> list[tuple[str, ...]]:
    common = ("--ticket-id", "OMN-2143", "--run-id", RUN)
    return [
        ("write", *common, "--phase", "implement", "--payload", json.dumps(PAYLOADS["implement"]), "--strict"),
        ("read", *common, "--phase", "implement"),
        ("validate", *common, "--phase", "implement"),
        ("list", "--ticket-id", "OMN-2143"),
        ("resume-point", *common),
    ]


def _assert_refused_everywhere(base: Path, capsys: pytest.CaptureFixture[str], fragment: str) -> None:
    for args in _all_commands(base):
        code, out, err = cli(capsys, *args, base=base)
        assert code == 1, (args, out, err)
        assert json.loads(out)["success"] is False
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("resumable: ") and "refused" in lines[0], (args, err)
        assert fragment in lines[0]
    code, out, err = cli(capsys, "show", "OMN-2143", base=base)
    assert code == 1 and out == "" and len(err.splitlines()) == 1 and "refused" in err


def test_a_symlinked_run_directory_is_refused(base: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (base / "OMN-2143").mkdir(parents=True)
    (base / "OMN-2143" / RUN).symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    _assert_refused_everywhere(base, capsys, "is a symbolic link")
    assert sorted(p.name for p in outside.iterdir()) == before  # nothing written through the link


def test_a_symlinked_ticket_directory_is_refused(base: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    base.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (base / "OMN-2143").symlink_to(tmp_path / "elsewhere")
    _assert_refused_everywhere(base, capsys, "is a symbolic link")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_symlinked_checkpoint_file_is_refused(base: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir(base).mkdir(parents=True)
    (run_dir(base) / "phase_1_implement_a1.yaml").symlink_to(outside / "phase_1_implement_a1.yaml")
    _assert_refused_everywhere(base, capsys, "phase_1_implement_a1.yaml is a symbolic link")


def test_a_fifo_checkpoint_file_is_refused_without_blocking(base: Path) -> None:
    run_dir(base).mkdir(parents=True)
    os.mkfifo(run_dir(base) / "phase_1_implement_a1.yaml")
    for args in (("checkpoint", "read", "--base-dir", str(base), "--ticket-id", "OMN-2143", "--run-id", RUN,
                  "--phase", "implement"),
                 ("checkpoint", "list", "--base-dir", str(base), "--ticket-id", "OMN-2143")):
        proc = run_cli(*args, timeout=20)  # a blocked open would hit the timeout
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1 and "is a FIFO" in proc.stderr and "Traceback" not in proc.stderr


def test_a_fifo_swapped_in_after_the_scan_is_refused_at_open(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan saw a regular file; by the time it is opened it is a FIFO: O_NONBLOCK + fstat refuse it."""
    from resumable.ledger import store

    ledger.write_checkpoint(document(), base_dir=base)
    real_load = store.load

    def swap_then_load(run_fd: int, *args: object) -> object:
        path = run_dir(base) / "phase_1_implement_a1.yaml"
        path.unlink()
        os.mkfifo(path)
        return real_load(run_fd, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "load", swap_then_load)
    with pytest.raises(StoreError, match="is a FIFO"):
        ledger.read("OMN-2143", RUN, "implement", base_dir=base)


def test_other_names_in_a_run_directory_are_ignored(base: Path) -> None:
    ledger.write_checkpoint(document(), base_dir=base)
    (run_dir(base) / "notes.txt").write_text("x")
    os.mkfifo(run_dir(base) / "a-fifo")
    (run_dir(base) / "not-a-run").mkdir()
    (base / "OMN-2143" / "not-a-uuid").mkdir()
    assert ledger.list_checkpoints("OMN-2143", base_dir=base).count == 1
