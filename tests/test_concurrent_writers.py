"""Concurrent writers lose nothing: 20 `resumable unit` processes at once on one run, and several
long-lived API writers interleaving; the journal stays a gap-free sequence. A negative control
shows the test can see lost writes when the lock is switched off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import resumable
from corehelpers import RESUMABLE, journal_of, records, snapshot_file
from resumable.errors import CorruptRunError


def env_for(runs: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DIR"] = str(runs)
    env.update(extra)
    return env


def test_twenty_cli_processes_lose_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=[f"u{i}" for i in range(20)])
    run.close()
    env = env_for(runs)
    procs = []
    for i in range(20):
        argv = [RESUMABLE, "unit", "r", f"u{i}", "done", "--note", f"by process {i}"]
        if i % 4 == 0:
            argv = [RESUMABLE, "item", "r", "--json", json.dumps({"finding": i})]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = [(p.wait(30), p.stderr.read() if p.stderr else b"") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    assert all(code == 0 for code, _ in results), results
    doc = resumable.read_doc(run.path)
    for i in range(20):
        if i % 4:
            assert doc["units"][f"u{i}"] == {**doc["units"][f"u{i}"], "status": "done", "note": f"by process {i}"}
    assert sorted(it["finding"] for it in doc["openItems"]) == [0, 4, 8, 12, 16]
    recs = records(journal_of(run))
    assert [s for s, _ in recs] == list(range(1, 22))
    snap, marker = snapshot_file(run.path)
    assert marker is not None and marker["seq"] == 21 and snap == doc


WORKER = textwrap.dedent(
    """
    import os, sys, resumable
    if os.environ.get("TEST_WITHOUT_FLOCK"):  # the negative control: writers without their lock
        import fcntl
        fcntl.flock = lambda *_: None
    name, count = sys.argv[1], int(sys.argv[2])
    run = resumable.open_run("r")
    for i in range(count):
        run.unit(f"{name}-{i}", "in_progress" if i % 3 else "done", note=str(i))
        if i % 10 == 5:
            run.phase(name, "running")
    run.close()
    """
)


def run_workers(runs: Path, n: int, count: int, **env: str) -> list[int]:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, f"w{k}", str(count)], env=env_for(runs, **env),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for k in range(n)]
    codes = [p.wait(60) for p in procs]
    for p in procs:
        if p.stderr:
            p.stderr.close()
    return codes


def test_api_writers_interleave_with_a_gap_free_sequence(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t")
    run.close()
    n, count = 5, 40
    assert run_workers(runs, n, count) == [0] * n
    recs = records(journal_of(run))
    per_worker = count + len([i for i in range(count) if i % 10 == 5])
    assert [s for s, _ in recs] == list(range(1, 2 + n * per_worker))
    doc = resumable.read_doc(run.path)
    for k in range(n):
        mine = [e["unit"] for _, e in recs if e["t"] == "unit" and e["unit"].startswith(f"w{k}-")]
        assert mine == [f"w{k}-{i}" for i in range(count)]  # each writer's order kept
        for i in range(count):
            assert doc["units"][f"w{k}-{i}"]["status"] == ("in_progress" if i % 3 else "done")
        assert doc["phases"][f"w{k}"]["status"] == "running"
    snap, marker = snapshot_file(run.path)
    assert marker is not None and marker["seq"] == recs[-1][0] and snap == doc


def test_readers_never_see_a_broken_run_while_writers_write(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t")
    run.close()
    reader = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import sys, time, resumable
            seen, deadline = 0, time.time() + 20
            while time.time() < deadline:
                doc = resumable.read_doc(sys.argv[1])
                n = len(doc["units"])
                assert n >= seen, (n, seen)
                seen = n
                if n == 60:
                    break
            print(seen)
            """), str(run.path)],
        env=env_for(runs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run_workers(runs, 3, 20) == [0, 0, 0]
    out, err = reader.communicate(timeout=30)
    assert reader.returncode == 0, err
    assert out.strip() == "60"


def test_negative_control_without_the_lock_writes_are_lost(tmp_path: Path) -> None:
    """With the flock switched off in the workers the same workload loses or corrupts records: the
    positive tests above can see a lost write when there is one."""
    for attempt in range(3):
        runs = tmp_path / f"runs{attempt}"
        run = resumable.open_run("r", runs_dir=runs)
        run.init("t")
        run.close()
        run_workers(runs, 5, 40, TEST_WITHOUT_FLOCK="1")
        try:
            doc = resumable.read_doc(run.path)
            units = len(doc["units"])
            recs = len(records(journal_of(run)))
        except CorruptRunError:
            return
        if units < 5 * 40 or recs < 1 + 5 * 44:
            return
    raise AssertionError("no write was lost without the lock: the concurrency tests prove nothing")


def test_concurrent_inits_exactly_one_wins(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = env_for(runs)
    procs = [subprocess.Popen([RESUMABLE, "init", "r", "--task", f"task {i}"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(8)]
    results = [(p.wait(30), *p.communicate()) for p in procs]
    winners = [r for r in results if r[0] == 0]
    assert len(winners) == 1 and winners[0][1] == "r\n", results
    for code, out, err in results:
        if code:
            assert code == 2 and out == "" and "LIVE checkpoint" in err and len(err.splitlines()) == 1
    assert [e["t"] for _, e in records(runs / "r.journal.jsonl")] == ["init"]
    assert not (runs / "archive").exists()
