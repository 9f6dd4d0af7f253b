"""examples/shards: the many-similar-steps pipeline (8 shards x download/clean/features, merge,
train, 3 evaluations, report) from one job file with no generator, at 8 shards and at 1,000 (the
same job file, 1,000 files in raw/). Each size runs, is interrupted, resumes, and an edit of one
shard's raw file re-runs exactly that shard's chain and what needs it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from corehelpers import RESUMABLE, cli, ok

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "shards"
AFTER = ["merge", "train", "evaluate+val", "evaluate+test", "evaluate+holdout", "report"]


def test_the_job_file_is_short_and_has_no_generator() -> None:
    text = (EXAMPLE / "resumable.toml").read_text()
    assert len(text.splitlines()) <= 40
    assert sorted(p.name for p in (EXAMPLE / "raw").iterdir()) == [f"0{i}.csv" for i in range(1, 9)]
    assert "files = \"raw/{shard}.csv\"" in text


def _copy(tmp_path: Path, shards: int | None = None) -> Path:
    work = tmp_path / "shards"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("out", ".resumable", "report.md"))
    if shards is not None:
        subprocess.run(["sh", "bin/make-raw.sh", str(shards)], cwd=work, check=True, capture_output=True)
    return work


def _run(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("run", *args, cwd=work, runs=work / ".resumable" / "runs", timeout=900)


def _units(work: Path) -> dict[str, dict[str, object]]:
    doc = json.loads((work / ".resumable" / "runs" / "shards.json").read_text())
    units: dict[str, dict[str, object]] = doc["units"]
    return units


def _done_attempts(work: Path) -> dict[str, int]:
    """How many times each step ran to done."""
    out = {}
    for uid, u in _units(work).items():
        attempts = u.get("attempts")
        out[uid] = sum(1 for a in attempts if a.get("status") == "done") if isinstance(attempts, list) else 0
    return out


def _interrupt_and_resume(work: Path, total: int, after: int) -> None:
    """Start the run, stop it with Ctrl-C (SIGINT) once ``after`` steps are done, resume it: it
    ends done, and no step that was done ran again."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DIR"] = str(work / ".resumable" / "runs")
    proc = subprocess.Popen([RESUMABLE, "run", "-j", "2"], cwd=work, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    done = 0
    for line in proc.stdout:  # waits on the run's own lines: no sleep
        if line.startswith("done "):
            done += 1
            if done == after:
                proc.send_signal(signal.SIGINT)
                break
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, (out, err)
    first = _done_attempts(work)
    assert after <= sum(first.values()) < total
    r = _run(work, "-j", "2", "-q")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.endswith(f"shards: done ({total - sum(first.values())} done, {sum(first.values())} skipped)\n")
    again = _done_attempts(work)
    assert set(again.values()) == {1}, {k: v for k, v in again.items() if v != 1}  # nothing done ran twice
    assert len(again) == total


def _edit_one_shard(work: Path, shard: str, total: int) -> None:
    with open(work / "raw" / f"{shard}.csv", "a") as f:
        f.write("999,1.0\n")
    chain = [f"download+{shard}", f"clean+{shard}", f"features+{shard}", *AFTER]
    dry = ok(_run(work, "--dry-run")).splitlines()
    assert dry[0] == (f"run   download: 1 of {(total - 6) // 3} instances (download+{shard}: input changed:"
                      f" raw/{shard}.csv); {(total - 6) // 3 - 1} skip (done)")
    assert dry[-1] == f"9 to run, {total - 9} to skip (dry run: nothing executed or written)"
    before = _done_attempts(work)
    r = _run(work, "-j", "2", "-q")
    assert r.returncode == 0, (r.stdout, r.stderr)
    after = _done_attempts(work)
    ran = sorted(uid for uid in after if after[uid] != before[uid])
    assert ran == sorted(chain)
    assert ok(_run(work)).endswith(f"shards: done ({total} skipped)\n")
    assert cli("status", "--check", cwd=work, runs=work / ".resumable" / "runs").returncode == 0


def test_eight_shards(tmp_path: Path) -> None:
    work = _copy(tmp_path)
    _interrupt_and_resume(work, total=30, after=5)
    report = (work / "report.md").read_text()
    assert "| val | " in report and "| holdout | " in report
    status = ok(cli("status", cwd=work, runs=work / ".resumable" / "runs"))
    assert "families download  8/8 done\n         clean     8/8 done\n" in status
    _edit_one_shard(work, "03", total=30)
    # A new file is one more shard: its 3 steps run, and what merges them all.
    shutil.copy(work / "raw" / "08.csv", work / "raw" / "09.csv")
    before = _done_attempts(work)
    assert ok(_run(work, "-q")) == "shards: done (9 done, 24 skipped)\n"
    after = _done_attempts(work)
    assert sorted(u for u in after if after[u] != before.get(u, 0)) == sorted(
        ["download+09", "clean+09", "features+09", *AFTER])


@pytest.mark.slow
def test_a_thousand_shards_with_the_same_job_file(tmp_path: Path) -> None:
    work = _copy(tmp_path, shards=1000)
    _interrupt_and_resume(work, total=3006, after=400)
    _edit_one_shard(work, "0500", total=3006)
