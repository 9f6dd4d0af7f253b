"""`resumable mcp` as a command: its help never loads the SDK, a bad store is one line before the
server starts, and a missing SDK says which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcphelpers import RESUMABLE


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["HOME"] = str(tmp_path)
    env.update(extra)
    return env


def _imported(tmp_path: Path, *args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", RESUMABLE, *args], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_help_and_the_other_commands_never_load_the_sdk(tmp_path: Path) -> None:
    for args in (("mcp", "--help"), ("--help",), ("skills", "list"), ("status", "--list")):
        loaded = _imported(tmp_path, *args)
        assert "mcp" not in loaded and "pydantic" not in loaded, args
        assert not any(m.startswith("resumable.mcp") for m in loaded), args


def _one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("resumable: "), proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def test_a_bad_store_is_one_line_before_the_server_starts(tmp_path: Path) -> None:
    for args, fragment in ((["--store", "mysql://x/y"], "unknown store"),
                           (["--dir", str(tmp_path), "--store", "postgresql://x/y"], "not both")):
        proc = subprocess.run([RESUMABLE, "mcp", *args], capture_output=True, text=True, env=_env(tmp_path),
                              cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60, check=False)
        _one_line_error(proc, fragment)


def test_without_the_sdk_it_names_the_extra(tmp_path: Path) -> None:
    """An `mcp` package that cannot be imported (as when the extra is not installed) is one line
    naming the extra to install."""
    fake = tmp_path / "fake" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mcp')\n")
    proc = subprocess.run([RESUMABLE, "mcp"], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env=_env(tmp_path, PYTHONPATH=str(tmp_path / "fake")), stdin=subprocess.DEVNULL, check=False)
    _one_line_error(proc, "pip install 'resumable-runs[mcp]'")


def test_the_server_ends_when_its_client_goes_away(tmp_path: Path) -> None:
    """stdin closed at once: the server exits 0, quietly (an agent closing its session)."""
    proc = subprocess.run([RESUMABLE, "mcp", "--dir", str(tmp_path / "runs")], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "runs").exists()  # serving creates nothing
