"""Measurements shared by ``benchmarks.transitions`` and ``benchmarks.proof``.

Every performance goal is a ratio to a baseline measured in the same process, on the same disk:
``L`` = one append of a 100-byte line + fsync. Absolute times vary with the machine and its load;
the ratios are what the goals bound.
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from resumable import api, fsio
from resumable.core import jsonio
from resumable.store.files import journal
from resumable.store.files.layout import files_for
from resumable.store.files.loader import load


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def baseline_append_fsync(work: Path, n: int = 2000) -> list[float]:
    """One append of a 100-byte line + fsync, n times (seconds each)."""
    path = work / "baseline.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = b"x" * 99 + b"\n"
    out = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            out.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return out


def make_run(runs: Path, n_units: int, run_id: str = "bench") -> api.Run:
    run = api.open_run(run_id, runs_dir=runs)
    run.init("benchmark", units=[f"u{i}" for i in range(n_units)])
    return run


def api_transitions(runs: Path, n_units: int, samples: int) -> list[float]:
    """Seconds per ``Run.unit`` call on an n-unit run (alternating in_progress / blocked on
    units spread over the run), after the run was created."""
    run = make_run(runs, n_units, f"t{n_units}")
    step = max(1, n_units // samples)
    out = []
    gc.collect()
    gc.disable()
    try:
        for i in range(samples):
            u = f"u{(i * step) % n_units}"
            state = "in_progress" if (i // max(1, n_units // step)) % 2 == 0 else "blocked"
            t = time.perf_counter()
            run.unit(u, state)
            out.append(time.perf_counter() - t)
    finally:
        gc.enable()
    run.close()
    return out


def interleaved(runs: Path, n_units: int, samples: int) -> tuple[list[float], list[float]]:
    """(raw append+fsync samples, API transition samples) taken alternately on the same disk, so
    that both see the same background load (other users' I/O makes tails come and go)."""
    run = make_run(runs, n_units, f"i{n_units}")
    fd = os.open(runs / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = b"x" * 99 + b"\n"
    raw, api_s = [], []
    gc.collect()
    gc.disable()
    try:
        for i in range(samples):
            t = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            raw.append(time.perf_counter() - t)
            u = f"u{(i * 7) % n_units}"
            state = "in_progress" if (i * 7 // n_units) % 2 == 0 else "blocked"
            t = time.perf_counter()
            run.unit(u, state)
            api_s.append(time.perf_counter() - t)
    finally:
        gc.enable()
        os.close(fd)
    run.close()
    return raw, api_s


def seed_transitions(runs: Path, n_units: int, samples: int) -> list[float]:
    """The seed's approach: every transition rewrites the whole pretty JSON document (temp file +
    fsync + rename), as the seed's status file was written."""
    runs.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"schemaVersion": 2, "id": "seed", "task": "t", "status": "running",
                           "units": {f"u{i}": {"status": "pending", "dependsOn": [], "note": "",
                                                "createdAt": "2026-01-01T00:00:00Z",
                                                "updatedAt": "2026-01-01T00:00:00Z"}
                                     for i in range(n_units)}}
    path = runs / "seed.json"
    tmp = runs / ".seed.json.tmp"
    import json

    out = []
    for i in range(samples):
        t = time.perf_counter()
        u = doc["units"][f"u{(i * 7919) % n_units}"]
        u["status"] = "in_progress"
        u["updatedAt"] = "2026-01-01T00:00:01Z"
        data = (json.dumps(doc, indent=2) + "\n").encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, path)
        out.append(time.perf_counter() - t)
    return out


def load_time(snapshot: Path, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        api.read_doc(snapshot)
        best = min(best, time.perf_counter() - t)
    return best


def cli_ratio(work: Path, repeat: int = 15) -> tuple[float, float, float]:
    """(median resumable unit wall, median python -c pass wall, ratio), interleaved runs."""
    runs = work / "cli"
    make_run(runs, 10, "cli").close()
    # Measure the CLI as installed: pip compiles bytecode at install time, but an editable
    # checkout under PYTHONDONTWRITEBYTECODE=1 would recompile every module on every call.
    import compileall

    import resumable

    compileall.compile_dir(str(Path(resumable.__file__).parent), quiet=1)
    exe = Path(sys.executable).with_name("resumable")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "resumable"]
    env = dict(os.environ, RESUMABLE_DIR=str(runs))
    tc, tp = [], []
    for i in range(repeat):
        state = "in_progress" if i % 2 == 0 else "blocked"
        t = time.perf_counter()
        subprocess.run([*cmd, "unit", "cli", f"u{i % 10}", state], env=env, check=True)
        tc.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        tp.append(time.perf_counter() - t)
    mc, mp = statistics.median(tc), statistics.median(tp)
    return mc, mp, mc / mp


def whole_run(runs: Path, n_units: int) -> tuple[float, int, int]:
    """A whole n-unit run, 3 transitions per unit, snapshot refreshes included (init, the
    transitions, close). Returns (seconds, snapshot bytes written, journal bytes)."""
    written = 0
    real = fsio.atomic_write

    def counting(path: str, data: bytes | Iterable[bytes], **kw: bool) -> int:
        # The snapshot comes in pieces (never held whole): count what was written.
        nonlocal written
        size = real(path, data, **kw)
        written += size
        return size

    fsio.atomic_write = counting  # type: ignore[assignment]
    try:
        t = time.perf_counter()
        run = make_run(runs, n_units, "whole")
        init_snapshot = written
        for i in range(n_units):
            u = f"u{i}"
            run.unit(u, "in_progress")
            run.unit(u, "in_progress", note="working")
            run.unit(u, "done")
        run.close()
        elapsed = time.perf_counter() - t
    finally:
        fsio.atomic_write = real  # type: ignore[assignment]
    jbytes = len((runs / "whole.journal.jsonl").read_bytes())
    _ = init_snapshot
    return elapsed, written, jbytes


def concurrent_throughput(runs: Path, writers: int, each: int, n_units: int) -> float:
    """Aggregate transitions per second of ``writers`` processes writing one n-unit run at once
    (writer w moves unit u<w> back and forth)."""
    make_run(runs, max(n_units, writers), "conc").close()
    go_r, go_w = os.pipe()
    pids = []
    for w in range(writers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(go_w)
                run = api.open_run("conc", runs_dir=runs)
                run.refresh()
                os.read(go_r, 1)  # barrier: all start together
                for j in range(each):
                    run.unit(f"u{w}", "in_progress" if j % 2 == 0 else "blocked")
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(go_r)
    time.sleep(0.3)
    t = time.perf_counter()
    os.write(go_w, b"x" * writers)
    bad = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    elapsed = time.perf_counter() - t
    os.close(go_w)
    if bad:
        raise RuntimeError(f"{bad} concurrent writers failed")
    return writers * each / elapsed


def tail_load(runs: Path, n_units: int, tail: int) -> float:
    """Seconds per journal record to load a run whose snapshot is ``tail`` records behind (as a
    writer killed before its next refresh leaves it)."""
    make_run(runs, n_units, "tail").close()
    jpath = runs / "tail.journal.jsonl"
    data = jpath.read_bytes()
    seq = len(data.splitlines())
    chunks = []
    for i in range(tail):
        seq += 1
        ev = {"t": "unit", "unit": f"u{i % n_units}", "state": "in_progress" if i % 2 == 0 else "blocked",
              "at": "2026-01-01T00:00:00Z"}
        chunks.append(journal.encode(seq, ev))
    jpath.write_bytes(data + b"".join(chunks))
    _ = jsonio
    gc.collect()
    best = load_time(runs / "tail.json", repeat=3)
    # Sanity: the tail really was replayed.
    loaded = load(files_for(str(runs / "tail.json")))
    if loaded.seq != seq:
        raise RuntimeError(f"tail load ended at seq {loaded.seq}, expected {seq}")
    return best / tail


def spawn_time(repeat: int = 30) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def runner_overhead(work: Path, steps: int = 40) -> float:
    """Seconds of runner overhead per shell step: (wall(1 + steps) - wall(1)) / steps, minus
    nothing (the step's own spawn is inside); compare with spawn + 3 appends + 1 ms."""
    exe = Path(sys.executable).with_name("resumable")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "resumable"]

    def wall(n: int, tag: str) -> float:
        state = work / f"runner-{tag}"
        args = [*cmd, "run", "--job", f"j{tag}", "--state-dir", str(state), "-q"]
        for i in range(n):
            args += ["--step", f"s{i}:true"]
        t = time.perf_counter()
        p = subprocess.run(args, capture_output=True, text=True)
        elapsed = time.perf_counter() - t
        if p.returncode != 0:
            raise RuntimeError(f"runner failed: {p.stderr.strip()[-300:]}")
        shutil.rmtree(state, ignore_errors=True)
        return elapsed

    ones = [wall(1, f"a{i}") for i in range(3)]
    manys = [wall(1 + steps, f"b{i}") for i in range(3)]
    return (min(manys) - min(ones)) / steps


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t
