"""The walkthrough of docs/many-machines.md ("Running on many machines"), run as it is written: two
workers on this machine standing in for two hosts, against a test database."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from pgtests import BIN
from storecase import clean

DOC = Path(__file__).resolve().parents[2] / "docs" / "many-machines.md"
EXAMPLE_URL = "postgresql://you@db-host/resumable"


def walkthrough() -> str:
    text = DOC.read_text()
    marker = text.index("<!-- walkthrough")
    block = re.search(r"```sh\n(.*?)```", text[marker:], re.S)
    assert block is not None, "no ```sh block after the walkthrough marker"
    return block.group(1)


def test_the_walkthrough_runs_as_written(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    script = walkthrough()
    assert EXAMPLE_URL in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the `resumable` of this checkout
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script.replace(EXAMPLE_URL, pg_url)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stderr == "", proc.stderr
    out = proc.stdout
    assert "submitted nightly to " in out and "5 step(s) to run, 0 skipped; waiting for workers" in out
    assert "✓ DONE" in out and "5/5 done" in out
    assert "5 skipped; nothing to run: the run is finished" in out  # the second submit
    assert (tmp_path / "report.txt").read_text().startswith("fetched\na on ")
    hosts = re.findall(r"^(\S+) #1 epoch 1  done exit 0 .* on \S+ \((\S+)\)$", out, re.M)
    assert sorted(step for step, _ in hosts) == ["fetch", "part-a", "part-b", "part-c", "report"]
    assert len({worker for _, worker in hosts}) == 2  # both "hosts" ran steps
    logs = [(tmp_path / f"worker-{w}.log").read_text() for w in "ab"]
    assert all("done   nightly/" in log for log in logs), logs
