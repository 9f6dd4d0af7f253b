"""Reliability goals of the runner (R7, R8, R10): real `resumable run` processes, real signals.

Each returns a ``goals.Result``. Time bounds are part of the figure; ``timing=True`` (the proof
entry point) also makes them pass/fail criteria, pytest leaves them out (a loaded CI machine is
slower, not wrong).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from resumable import store

from .goals import Result


def is_live(state: Path, run_id: str) -> dict[str, Any] | None:
    return store.open_backend(state).lease(run_id).holder()


def lock_path(state: Path, run_id: str) -> Path:
    return state / f"{run_id}.runner.lock"

STEPTREE = Path(__file__).with_name("steptree.py")


def _runner(state: Path, job: str, steps: list[str], *extra: str) -> list[str]:
    args = [sys.executable, "-m", "resumable", "run", "--job", job, "--state-dir", str(state), "-q", *extra]
    for s in steps:
        args += ["--step", s]
    return args


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def _wait_for(pred, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def _kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _pids_in(d: Path, names: list[str]) -> list[int]:
    out = []
    for n in names:
        with contextlib.suppress(OSError, ValueError):
            out.append(int((d / n).read_text()))
    return out


def r10_resume_reaps(base: Path, trials: int = 20, timing: bool = False) -> Result:
    """SIGKILL the runner while its step runs; the next runner must reap the leftover group before
    it starts the step again: the step takes an flock, so two live copies would be seen."""
    res = Result("R10", True, "")
    good = 0
    for t in range(trials):
        d = base / f"t{t}"
        d.mkdir(parents=True)
        state = d / "state"
        step = f"s:{sys.executable} {STEPTREE} once {d}"
        r1 = subprocess.Popen(_runner(state, "j", [step], "--grace", "1s"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        log = d / "log"
        if not _wait_for(lambda log=log: log.exists() and "start" in log.read_text(), 30):
            r1.kill()
            res.fail(f"trial {t}: the step never started")
            continue
        first = int(log.read_text().split()[1])
        r1.send_signal(signal.SIGKILL)
        r1.wait()
        if not _alive(first):
            res.fail(f"trial {t}: the step died with its runner; nothing left to reap (test broken)")
            continue
        r2 = subprocess.Popen(_runner(state, "j", [step], "--grace", "1s"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        started = _wait_for(lambda log=log: log.read_text().count("start") + log.read_text().count("DOUBLE") >= 2, 30)
        (d / "go").write_text("")
        try:
            _out, err = r2.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            r2.kill()
            res.fail(f"trial {t}: the resumed runner hung")
            continue
        text = log.read_text()
        if "DOUBLE" in text:
            res.fail(f"trial {t}: two live copies of the step: {text.split()}")
        elif not started or text.count("start") != 2:
            res.fail(f"trial {t}: the step did not re-run once (log {text.split()}, exit {r2.returncode},"
                     f" {err.strip()[-200:]})")
        elif _alive(first):
            res.fail(f"trial {t}: the leftover step {first} is still alive")
            _kill_pids([first])
        elif r2.returncode != 0:
            res.fail(f"trial {t}: the resumed runner exited {r2.returncode}: {err.strip()[-200:]}")
        else:
            good += 1
    res.figure = f"{good}/{trials} runners SIGKILLed mid-step: leftover reaped before the re-run, never two live copies"
    res.ok = res.ok and good == trials
    return res


def r8_timeouts(base: Path, trials: int = 100, timing: bool = False, timeout: float = 1.5,
                grace: float = 0.5, parallel: int = 4) -> Result:
    res = Result("R8", True, "")
    walls: list[float] = []

    def one(t: int) -> tuple[str | None, float]:
        d = base / f"t{t}"
        d.mkdir(parents=True)
        step = f"s:{sys.executable} {STEPTREE} tree {d} 1"
        start = time.monotonic()
        p = subprocess.run(_runner(d / "state", "j", [step], "--timeout", f"{timeout}s", "--grace", f"{grace}s"),
                           capture_output=True, text=True, timeout=120)
        wall = time.monotonic() - start
        pids = _pids_in(d, ["pid1", "pid2", "pid3"])
        time.sleep(0.05)
        survivors = [pid for pid in pids if _alive(pid)]
        _kill_pids(survivors)
        if len(pids) < 3:
            return f"trial {t}: only {len(pids)} of 3 descendant levels started before the timeout", wall
        if survivors:
            return f"trial {t}: {len(survivors)} survivors after the timeout", wall
        if p.returncode != 1:
            return f"trial {t}: exit {p.returncode} (a timed-out step is exit 1): {p.stderr.strip()[-200:]}", wall
        return None, wall

    good = 0
    with ThreadPoolExecutor(parallel) as pool:
        for problem, wall in pool.map(one, range(trials)):
            walls.append(wall)
            if problem:
                res.fail(problem)
            else:
                good += 1
    bound = timeout + grace + 1.0
    worst = max(walls) if walls else 0.0
    late = sum(w > bound for w in walls)
    res.figure = (f"{good}/{trials} timeouts (3 levels, one ignoring SIGTERM, one holding stdout)"
                  f" left no survivor; runner wall time max {worst:.2f} s vs bound {bound:.1f} s"
                  f" ({late} over; includes the runner's own start-up)")
    if timing and late:
        res.fail(f"{late} runs exceeded timeout + grace + 1 s")
    return res


def r7_runner_lock(base: Path, trials: int = 20, timing: bool = False) -> Result:
    res = Result("R7", True, "")
    good = 0
    waits: list[float] = []
    for t in range(trials):
        d = base / f"t{t}"
        d.mkdir(parents=True)
        state = d / "state"
        flag = d / "go"
        step = f"s:while [ ! -e {flag} ]; do sleep 0.02; done"
        r1 = subprocess.Popen(_runner(state, "j", [step], "--grace", "0.5s"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        if not _wait_for(lambda state=state: is_live(state, "j") is not None, 30):
            r1.kill()
            res.fail(f"trial {t}: the first runner never took the run")
            continue
        # 1. A live runner is never displaced.
        p = subprocess.run(_runner(state, "j", [step]), capture_output=True, text=True, timeout=60)
        if p.returncode != 2 or r1.poll() is not None:
            res.fail(f"trial {t}: a second runner was not refused while the first lives (exit {p.returncode})")
            r1.kill()
            continue
        # 2. SIGKILLed holder: the next runner proceeds at once.
        r1.send_signal(signal.SIGKILL)
        r1.wait()
        flag.write_text("")  # the leftover step finishes by itself too
        start = time.monotonic()
        p = subprocess.run(_runner(state, "j", [step]), capture_output=True, text=True, timeout=60)
        waits.append(time.monotonic() - start)
        if p.returncode != 0:
            res.fail(f"trial {t}: the runner after a SIGKILLed one failed (exit {p.returncode}):"
                     f" {p.stderr.strip()[-200:]}")
            continue
        good += 1
    # 3. Pid reuse: the lock file names a dead runner whose pid and group now belong to an
    #    innocent process (different start token). The next runner proceeds and never signals it.
    d = base / "reuse"
    d.mkdir()
    state = d / "state"
    state.mkdir()
    innocent = subprocess.Popen(["sleep", "60"], start_new_session=True)
    import json

    lock_path(state, "j").write_text(json.dumps({
        "v": 1, "pid": innocent.pid, "host": os.uname().nodename, "startedAt": "2026-01-01T00:00:00Z",
        "startToken": "1", "token": f"{innocent.pid}-1",
        "groups": [{"pgid": innocent.pid, "startToken": "1"}]}))
    p = subprocess.run(_runner(state, "j", ["s:true"]), capture_output=True, text=True, timeout=60)
    reuse_ok = p.returncode == 0 and innocent.poll() is None
    if not reuse_ok:
        res.fail(f"pid reuse: exit {p.returncode}, innocent process {'alive' if innocent.poll() is None else 'KILLED'}")
    innocent.kill()
    innocent.wait()
    worst = max(waits) if waits else 0.0
    res.figure = (f"{good}/{trials} SIGKILLed holders: next runner proceeds at once (max {worst:.2f} s incl."
                  f" start-up), live holder never displaced; pid reuse with a different start token:"
                  f" {'innocent process untouched' if reuse_ok else 'FAILED'}")
    res.ok = res.ok and good == trials and reuse_ok
    if timing and worst > 5.0:
        res.fail(f"the next runner took {worst:.2f} s")
    return res


def _lease_held(state: Path, run_id: str) -> bool:
    import fcntl

    try:
        fd = os.open(lock_path(state, run_id), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _attempts(log: Path) -> list[list[int]]:
    text = log.read_text() if log.exists() else ""
    return [[int(p) for p in line.split()[1:]] for line in text.splitlines() if line.startswith("start")]


def _interruptible() -> None:
    """In the runner's child, before exec: SIGINT back to its default. A program started with
    SIGINT ignored (a background job of a script, `nohup ... &`) keeps ignoring it, so Ctrl-C
    would not reach a runner started by a proof run that was itself started that way."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def r10_kill_loop(base: Path, rounds: int = 100, seed: int = 10, timing: bool = False) -> Result:
    """Runners killed at random points, again and again, on one run: mid-step (SIGKILL: the step and
    its grandchild, which left the step's group, outlive the runner), while reaping what an earlier
    one left (the leftovers ignore SIGTERM, so the next runner waits out its grace: it is killed or
    Ctrl-C'd inside it), and just after starting the step. Then a clean run. The step holds an
    flock that its grandchild shares: no attempt ever starts while any process of an earlier one
    lives (it would log DOUBLE), and no process of any attempt survives the end."""
    res = Result("R10", True, "")
    d = base / "loop"
    d.mkdir(parents=True)
    state = d / "state"
    log = d / "log"
    args = _runner(state, "j", [f"s:{sys.executable} {STEPTREE} guarded {d}"], "--grace", "0.2s")
    rng = random.Random(seed)
    counts = {"mid-step": 0, "while reaping": 0, "just after start": 0, "at random": 0}
    sigs = {"SIGKILL": 0, "SIGINT": 0}
    leftover = False  # a SIGKILLed runner left its step running
    for i in range(rounds):
        n_before = len(_attempts(log))
        runner = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=_interruptible)

        def holds(runner: subprocess.Popen[str] = runner) -> bool:
            return _lease_held(state, "j") or runner.poll() is not None

        def started(runner: subprocess.Popen[str] = runner, n: int = n_before) -> bool:
            return len(_attempts(log)) > n or runner.poll() is not None

        if leftover and rng.random() < 0.5:
            where = "while reaping"
            # It takes the lease, sends SIGTERM (ignored), and waits out a 2 s grace: kill it in it.
            _wait_for(holds, 30)
            time.sleep(rng.uniform(0.0, 1.5))
            if len(_attempts(log)) > n_before:
                where = "mid-step"  # it had already reaped and started the step
        elif rng.random() < 0.3:
            where = "just after start"
            _wait_for(started, 30)
        elif rng.random() < 0.5:
            where = "mid-step"
            _wait_for(started, 30)
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            where = "at random"
            time.sleep(rng.uniform(0.0, 1.0))
        sig = signal.SIGKILL if rng.random() < 0.7 else signal.SIGINT
        counts[where] += 1
        sigs[sig.name] += 1
        if runner.poll() is None:
            runner.send_signal(sig)
        try:
            runner.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.communicate()
            res.fail(f"round {i}: the runner did not stop after {sig.name}")
        attempts = _attempts(log)
        leftover = bool(attempts) and any(_alive(p) for p in attempts[-1])
        if "DOUBLE" in (log.read_text() if log.exists() else ""):
            res.fail(f"round {i} ({where}, {sig.name}): an attempt started while an earlier one lived")
            break
    (d / "go").write_text("")
    final = subprocess.run(args, capture_output=True, text=True, timeout=120)
    attempts = _attempts(log)
    text = log.read_text() if log.exists() else ""
    survivors = [p for pids in attempts for p in pids if _alive(p)]
    if final.returncode != 0:
        res.fail(f"the final clean run exited {final.returncode}: {final.stderr.strip()[-300:]}")
    if "DOUBLE" in text:
        res.fail(f"two attempts overlapped: {[line for line in text.splitlines() if 'DOUBLE' in line][:5]}")
    if survivors:
        res.fail(f"{len(survivors)} process(es) of earlier attempts survived: {survivors[:10]}")
        _kill_pids(survivors)
    res.figure = (f"{rounds} runners killed ({sigs['SIGKILL']} SIGKILL, {sigs['SIGINT']} SIGINT: "
                  + ", ".join(f"{v} {k}" for k, v in counts.items())
                  + f"), then a clean run: {len(attempts)} attempts, none overlapping; "
                  f"{2 * len(attempts)} processes, {len(survivors)} survived")
    return res
