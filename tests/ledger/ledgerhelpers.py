"""Helpers of the ledger tests: payloads for every default phase, documents, and two ways to drive
the ledger: the Python API and the CLI (in-process, through the real ``resumable`` entry point's
``main`` with its error translation). (Not in conftest.py: every test directory has one, and
``from conftest import`` would find another directory's.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from resumable import ledger
from resumable.errors import ResumableError
from resumable.ledger.model import to_dict

BIN = Path(sys.executable).parent
RESUMABLE = str(BIN / "resumable")
RUN = "4fa2159f-9c61-5f8b-9ae5-28692b46cbd7"  # the seed's UUIDv5 of "a1b2c3d4"

PAYLOADS: dict[str, dict[str, Any]] = {
    "implement": {"branch_name": "feat/OMN-2143", "commit_sha": "a1b2c3d", "files_changed": ["src/foo.py"]},
    "local_review": {"iteration_count": 2, "issue_fingerprints": ["fp1"], "last_clean_sha": "b2c3d4e"},
    "create_pr": {"pr_url": "https://example.invalid/pr/7", "pr_number": 7, "head_sha": "c3d4e5f"},
    "pr_release_ready": {"last_review_sha": "d4e5f6a", "issue_fingerprints": []},
    "ready_for_merge": {"label_applied_at": "2026-03-28T22:00:00Z"},
}


def document(phase: str = "implement", *, ticket: str = "OMN-2143", run: str = RUN, attempt: int = 1,
             timestamp: str = "2026-03-28T22:00:00Z", **changes: Any) -> dict[str, Any]:
    """A valid checkpoint document (the seed's model_dump(mode="json") shape)."""
    doc: dict[str, Any] = {
        "schema_version": "1.0.0", "run_id": run, "ticket_id": ticket, "phase": phase,
        "timestamp_utc": timestamp, "repo_commit_map": {}, "artifact_paths": [], "attempt_number": attempt,
        "phase_payload": {"phase": phase, **PAYLOADS[phase]},
    }
    doc.update(changes)
    return doc


def cli(capsys: pytest.CaptureFixture[str], *args: str, base: Path | None = None) -> tuple[int, str, str]:
    """``resumable checkpoint ARGS`` in-process: (exit code, stdout, stderr)."""
    from resumable.cli.main import main

    argv = ["checkpoint", *args]
    if base is not None and args and args[0] not in ("-v", "--verbose"):
        argv = ["checkpoint", args[0], "--base-dir", str(base), *args[1:]]
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``resumable ARGS`` as a real process."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    full.update(env or {})
    return subprocess.run([RESUMABLE, *args], capture_output=True, text=True, env=full, timeout=timeout, check=False)


class Driver:
    """One way of using the ledger; results normalised to the CLI's JSON shapes."""

    name = "?"

    def write(self, **kw: Any) -> dict[str, Any]:
        raise NotImplementedError

    def read(self, ticket: str, run: str, phase: str) -> dict[str, Any]:
        raise NotImplementedError

    def list(self, ticket: str, run: str | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def validate(self, ticket: str, run: str, phase: str, **kw: Any) -> dict[str, Any]:
        raise NotImplementedError


class ApiDriver(Driver):
    name = "api"

    def __init__(self, base: Path) -> None:
        self.base = base

    def _call(self, func: Any, *args: Any, **kw: Any) -> Any:
        try:
            return func(*args, base_dir=self.base, **kw)
        except ResumableError as exc:
            return {"success": False, "error": str(exc)}

    def write(self, **kw: Any) -> dict[str, Any]:
        result = self._call(ledger.write, kw.pop("ticket", "OMN-2143"), kw.pop("run", "a1b2c3d4"),
                            kw.pop("phase", "implement"), kw.pop("payload", PAYLOADS["implement"]), **kw)
        if isinstance(result, dict):
            return result
        return {"success": True, "checkpoint_path": result.checkpoint_path, "correlation_id": result.correlation_id}

    def read(self, ticket: str, run: str, phase: str) -> dict[str, Any]:
        result = self._call(ledger.read, ticket, run, phase)
        if isinstance(result, dict):
            return result
        out: dict[str, Any] = {"success": result.success, "warnings": list(result.warnings)}
        if result.checkpoint is not None:
            out["checkpoint"] = to_dict(result.checkpoint)
        else:
            out["error"] = result.error
        return out

    def list(self, ticket: str, run: str | None = None) -> dict[str, Any]:
        result = self._call(ledger.list_checkpoints, ticket, run)
        if isinstance(result, dict):
            return result
        return {"success": True, "count": result.count, "warnings": list(result.warnings),
                "checkpoints": [to_dict(c) for c in result.checkpoints]}

    def validate(self, ticket: str, run: str, phase: str, **kw: Any) -> dict[str, Any]:
        result = self._call(ledger.validate_stored, ticket, run, phase, **kw)
        if isinstance(result, dict):
            return {**result, "is_valid": False}
        return {"is_valid": result.is_valid, "success": result.success, "errors": list(result.errors),
                "warnings": list(result.warnings)}


class CliDriver(Driver):
    name = "cli"

    def __init__(self, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = base
        self.capsys = capsys
        self.last_code = 0

    def _json(self, *args: str) -> dict[str, Any]:
        code, out, err = cli(self.capsys, *args, base=self.base)
        self.last_code = code
        assert "Traceback" not in err
        assert len(err.splitlines()) <= 1, err
        data: dict[str, Any] = json.loads(out)
        assert "success" in data
        if code != 0 or data["success"] is False:  # every failure also says why on stderr, in one line
            assert err.startswith("resumable: ") and err.count("\n") == 1, (args, err)
        return data

    def write(self, **kw: Any) -> dict[str, Any]:
        args = ["write", "--ticket-id", kw.pop("ticket", "OMN-2143"), "--run-id", kw.pop("run", "a1b2c3d4"),
                "--phase", kw.pop("phase", "implement"),
                "--payload", json.dumps(kw.pop("payload", PAYLOADS["implement"]))]
        if "attempt" in kw and kw["attempt"] is not None:
            args += ["--attempt", str(kw.pop("attempt"))]
        kw.pop("attempt", None)
        for key, flag in (("repo_commit_map", "--repo-commit-map"), ("artifact_paths", "--artifact-paths")):
            if key in kw:
                args += [flag, json.dumps(kw.pop(key))]
        if "timestamp" in kw:
            args += ["--timestamp", kw.pop("timestamp")]
        assert not kw, kw
        data = self._json(*args)
        assert self.last_code == 0  # writes never block their caller
        return data

    def read(self, ticket: str, run: str, phase: str) -> dict[str, Any]:
        data = self._json("read", "--ticket-id", ticket, "--run-id", run, "--phase", phase)
        assert self.last_code == (0 if data["success"] else 1)
        return data

    def list(self, ticket: str, run: str | None = None) -> dict[str, Any]:
        data = self._json("list", "--ticket-id", ticket, *(["--run-id", run] if run else []))
        assert self.last_code == (0 if data["success"] else 1)
        return data

    def validate(self, ticket: str, run: str, phase: str, **kw: Any) -> dict[str, Any]:
        extra = [*(["--root", str(kw.pop("root"))] if "root" in kw else []),
                 *[a for r in kw.pop("repos", []) for a in ("--repo", r)]]
        assert not kw
        data = self._json("validate", "--ticket-id", ticket, "--run-id", run, "--phase", phase, *extra)
        assert "is_valid" in data
        assert self.last_code == (0 if data["is_valid"] else 1)
        return data


def run_dir(base: Path, ticket: str = "OMN-2143", run: str = RUN) -> Path:
    return base / ticket / run


def plant(base: Path, name: str, content: bytes | str, ticket: str = "OMN-2143", run: str = RUN) -> Path:
    directory = run_dir(base, ticket, run)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path
