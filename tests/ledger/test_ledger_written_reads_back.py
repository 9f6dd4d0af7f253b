"""A checkpoint write is acknowledged only for what readers will read back, and hostile values are
refused at the write, in the documented JSON with the documented exit code, never later by a
reader: lone surrogates, timestamps past the calendar once in UTC, artifact paths holding NUL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ledgerhelpers import PAYLOADS, RUN, cli, document, plant, run_cli

from resumable import ledger
from resumable.errors import InvalidInputError
from resumable.ledger import yamlfmt

WRITE = ("write", "--ticket-id", "OMN-2143", "--run-id", RUN, "--phase", "implement")


def _write(capsys: pytest.CaptureFixture[str], base: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = cli(capsys, *WRITE, *args, base=base)
    assert "Traceback" not in err and "internal error" not in err
    return code, json.loads(out), err


def _assert_refused(capsys: pytest.CaptureFixture[str], base: Path, fragment: str, *args: str) -> None:
    """Refused as the documented JSON (exit 0; --strict: 1), one stderr line, nothing on disk."""
    for strict, expected in (((), 0), (("--strict",), 1)):
        code, data, err = _write(capsys, base, *args, *strict)
        assert code == expected and data["success"] is False and set(data) == {"success", "error"}
        assert data["error"].startswith("Write failed: Invalid checkpoint: ") and fragment in data["error"]
        assert err.count("\n") == 1 and err.startswith("resumable: Write failed: Invalid checkpoint")
    assert not base.exists()


@pytest.mark.parametrize(("payload", "commit_map", "where"), [
    ('{"branch_name": "a\\ud800b", "commit_sha": "a1b2c3d"}', "{}", "phase_payload.branch_name"),
    ('{"branch_name": "b", "commit_sha": "a1b2c3d", "files_changed": ["x", "\\udfff"]}', "{}",
     "phase_payload.files_changed[1]"),
    ('{"branch_name": "b", "commit_sha": "a1b2c3d"}', '{"\\ud83d": "a1b2c3d"}', "a key of repo_commit_map"),
])
def test_a_lone_surrogate_is_refused_at_the_write(payload: str, commit_map: str, where: str, base: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """It was written with success true, and every reader then skipped the file as corrupt."""
    _assert_refused(capsys, base, f"{where} holds a lone surrogate", "--payload", payload,
                    "--repo-commit-map", commit_map)


def test_a_lone_surrogate_is_refused_by_the_api_and_validate(base: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"Invalid checkpoint: phase_payload.branch_name holds a lone "
                                                r"surrogate \\ud800"):
        ledger.write("OMN-2143", RUN, "implement", {**PAYLOADS["implement"], "branch_name": "\ud800"}, base_dir=base)
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        ledger.write_checkpoint(document(artifact_paths=["ok", "\udc80"]), base_dir=base)
    result = ledger.validate(document(ticket_id="OMN-2143", phase_payload={**document()["phase_payload"],
                                                                          "branch_name": "x\udfffy"}))
    assert not result.is_valid and "lone surrogate \\udfff" in result.errors[0]
    assert not base.exists()


def test_surrogate_pairs_and_other_text_are_written_and_read_back(base: Path) -> None:
    branch = "feat/😀-é-\x85-\x00-\t-\u2028-\x1b[2J"
    result = ledger.write("OMN-2143", RUN, "implement", {**PAYLOADS["implement"], "branch_name": branch},
                          artifact_paths=["a b/é.txt"], base_dir=base)
    got = ledger.read("OMN-2143", RUN, "implement", base_dir=base)
    assert got.checkpoint is not None and got.checkpoint.phase_payload.branch_name == branch  # type: ignore[attr-defined]
    assert got.checkpoint_path == result.checkpoint_path


def test_a_write_whose_bytes_would_not_read_back_is_refused(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule behind the surrogate case: the writer parses what it is about to publish, as a
    reader will, and publishes only bytes that come back as the same checkpoint. Shown here with
    PyYAML's own dumper, which writes U+0085 raw into a single-quoted string that reads back as a
    space (the defect yamlfmt's dumper works around)."""
    import yaml

    from resumable.ledger import writer

    def plain_dump(doc: dict[str, Any]) -> bytes:
        return yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, allow_unicode=True).encode()

    monkeypatch.setattr(writer.yamlfmt, "dump", plain_dump)
    with pytest.raises(InvalidInputError, match="it would read back different from what was given; nothing was "
                                                "written"):
        ledger.write("OMN-2143", RUN, "implement", {**PAYLOADS["implement"], "branch_name": "a\x85b"}, base_dir=base)
    assert not base.exists()  # nothing created: no directory, no attempt, no temp file
    monkeypatch.setattr(writer.yamlfmt, "dump", lambda doc: b"phase: [unclosed\n")
    with pytest.raises(InvalidInputError, match=r"it would not read back \(invalid YAML\)"):
        ledger.write("OMN-2143", RUN, "implement", PAYLOADS["implement"], base_dir=base)
    assert not base.exists()


@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+00:01"])
def test_a_timestamp_outside_the_calendar_in_utc_is_refused(stamp: str, base: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """It was an internal error (OverflowError), exit 1, and no JSON."""
    _assert_refused(capsys, base, f"timestamp_utc {stamp} is out of range", "--payload",
                    json.dumps(PAYLOADS["implement"]), "--timestamp", stamp)


def test_a_payload_datetime_outside_the_calendar_in_utc_is_refused(base: Path) -> None:
    with pytest.raises(InvalidInputError, match="label_applied_at 9999-12-31T23:59:59-23:59 is out of range"):
        ledger.write("OMN-2143", RUN, "ready_for_merge", {"label_applied_at": "9999-12-31T23:59:59-23:59"},
                     base_dir=base)


def test_an_artifact_path_holding_nul_is_refused(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was written, and then validate --root and resume-point --root failed with an internal error."""
    _assert_refused(capsys, base, "NUL character forbidden in artifact path: 'a\\x00b'", "--payload",
                    json.dumps(PAYLOADS["implement"]), "--artifact-paths", '["ok", "a\\u0000b"]')


def test_a_stored_file_with_a_nul_path_is_corrupt_and_validate_prints_its_json(base: Path, tmp_path: Path) -> None:
    """A file another tool wrote: every reader skips it as corrupt, in its JSON, without an internal error."""
    plant(base, "phase_1_implement_a1.yaml", yamlfmt.dump(document(artifact_paths=["a\x00b"])))
    common = ("--base-dir", str(base), "--ticket-id", "OMN-2143", "--run-id", RUN)
    proc = run_cli("checkpoint", "validate", *common, "--phase", "implement", "--root", str(tmp_path))
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["is_valid"] is False and data["success"] is False
    assert "NUL character forbidden in artifact path" in data["errors"][0]
    assert proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr
    proc = run_cli("checkpoint", "resume-point", *common, "--root", str(tmp_path))
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["resume_phase"] == "implement" and "NUL" in data["phases"][0]["reason"]


def test_validate_prints_its_json_even_on_a_defect(base: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from resumable.ledger import api

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a defect")

    monkeypatch.setattr(api, "validate_stored", broken)
    code, out, err = cli(capsys, "validate", "--ticket-id", "T", "--run-id", "r", "--phase", "implement", base=base)
    assert code == 1 and json.loads(out) == {"is_valid": False, "success": False,
                                             "error": "Validate failed: ZeroDivisionError"}
    assert err.count("\n") == 1 and "internal error (ZeroDivisionError: a defect)" in err


def test_read_and_validate_failures_say_why_on_stderr(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ("--ticket-id", "OMN-2143", "--run-id", RUN, "--phase", "implement")
    for verb in ("read", "validate"):
        code, out, err = cli(capsys, verb, *common, base=base)
        assert code == 1 and err == f"resumable: Checkpoint directory not found: {RUN}\n"
    ledger.write("OMN-2143", RUN, "local_review", PAYLOADS["local_review"], base_dir=base)
    code, out, err = cli(capsys, "read", *common, base=base)
    assert code == 1 and err == "resumable: No checkpoint found for phase implement\n"
    plant(base, "phase_1_implement_a1.yaml", "not: [yaml")
    code, out, err = cli(capsys, "read", *common, base=base)
    assert code == 1 and err == f"resumable: Corrupt checkpoint file OMN-2143/{RUN}/phase_1_implement_a1.yaml: " \
                                "invalid YAML\n"
    ledger.write("OMN-2143", RUN, "implement", PAYLOADS["implement"], artifact_paths=["missing.txt"], base_dir=base)
    code, out, err = cli(capsys, "validate", *common, "--root", str(base), base=base)
    assert code == 1 and json.loads(out)["is_valid"] is False
    assert err == f"resumable: Artifact path does not exist under {base}: missing.txt\n"


def test_absurd_nesting_is_refused_as_a_type_not_a_crash() -> None:
    deep: list[Any] = []
    for _ in range(50_000):
        deep = [deep]
    for extra in ({"x": deep}, {"files_changed": deep}):
        result = ledger.validate(document(phase_payload={**document()["phase_payload"], **extra}))
        assert not result.is_valid and result.errors


def test_a_nan_which_equals_nothing_still_reads_back(base: Path, tmp_path: Path) -> None:
    phases = tmp_path / "phases.toml"
    phases.write_text('format = 1\n[[phase]]\nname = "p"\n[phase.payload]\nratio = "float"\n')
    ledger.write("T", "r", "p", {"ratio": float("nan")}, base_dir=base, phases=str(phases))
    got = ledger.read("T", "r", "p", base_dir=base, phases=str(phases)).checkpoint
    assert got is not None and got.phase_payload.ratio != got.phase_payload.ratio  # type: ignore[attr-defined]
