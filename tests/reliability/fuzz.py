"""R11: every verb of the command line under hostile arguments and corrupted run files.

Hypothesis drives ``resumable <verb> ...`` (the seed verbs, run, status, report, log) in this
process (``inproc.call``: a call costs milliseconds) and, in the full tier, as real processes too.
Each example copies a sandbox holding a few runs and job files, damages some of its files (bytes
flipped, cut or appended, files replaced by FIFOs, links, directories or wrong-typed documents,
forged files planted), then makes a handful of calls. Every call must:

- end with an exit code of the table (0, 1, 2, 3), never an internal error or a traceback;
- on failure say why in exactly one line, ``resumable: ...``, with no raw control character;
- finish within a timeout (a FIFO opened for reading would block forever);
- change nothing on disk when it fails (the writers' empty lock files excepted: any write attempt
  may create one, and they are never deleted), nor when it only reads;
- never write through a planted link (the victim file the links point at stays intact).

What is generated, and how it stays inside its sandbox, is in ``fuzz_inputs.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from .fuzz_inputs import REGRESSIONS, VICTIM, argv, build_template, corrupt, corruption, remove
from .inproc import Called, call, clean_env

READ_ONLY = ("get", "resume", "status", "log")
CHECKPOINT_READ_ONLY = ("read", "validate", "list", "resume-point", "show")
EXIT_CODES = (0, 1, 2, 3)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u2028\u2029]")
# What JSON output may never carry raw either: C0 (bar the layout's newline), DEL and C1.
JSON_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
CALL_TIMEOUT = 30.0  # seconds; nothing here legitimately takes more than a fraction of that


class CallTimeout(BaseException):
    """Raised by SIGALRM inside a call that hung (a BaseException, so nothing swallows it)."""


# --- the checks ------------------------------------------------------------------------------------


def disk(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root``: type, mode and, for files, bytes and mtime (links not followed,
    FIFOs never opened)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, files in os.walk(root):
        for name in (*dirnames, *files):
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st_.st_mode):
                with open(p, "rb") as f:
                    out[rel] = ("file", st_.st_mode, f.read(), st_.st_mtime_ns)
            else:
                out[rel] = ("other", stat.S_IFMT(st_.st_mode), st_.st_mode)
    return out


def _allowed_difference(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    """What changed, minus new empty writers' lock files (a write attempt may create one)."""
    changed = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        new = after.get(key)
        if key not in before and key.endswith(".lock") and new is not None and new[0] == "file" and new[2] == b"":
            continue
        changed.append(key)
    return changed


@dataclass
class Tally:
    calls: int = 0
    subprocess_calls: int = 0
    codes: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)  # first words of the error lines, for a look


def _timed(fn: Callable[[], Called]) -> Called:
    """``fn()``, interrupted by SIGALRM after CALL_TIMEOUT (a blocked open() or read() included:
    the handler's exception ends the system call). The flag, not the exception, says it happened:
    the command line turns any exception into an error line."""
    fired = [False]

    def alarm(signum: int, frame: Any) -> None:
        fired[0] = True
        raise CallTimeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CALL_TIMEOUT)
    try:
        result = fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if fired[0]:
        raise CallTimeout()
    return result


def _in_subprocess(args: list[str], env: dict[str, str], cwd: str) -> Called:
    exe = shutil.which("resumable", path=str(Path(sys.executable).parent)) or "resumable"
    try:
        p = subprocess.run([exe, *args], capture_output=True, env=env, cwd=cwd, timeout=CALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CallTimeout() from exc
    return Called(p.returncode, p.stdout, p.stderr.decode("utf-8", "replace"))


def check_call(args: list[str], sandbox: Path, tally: Tally, *, real_process: bool) -> None:
    work = sandbox / "work"
    env = clean_env(HOME=str(sandbox / "home"), RESUMABLE_DIR=str(work / "runs"), NO_COLOR="1")
    before = disk(sandbox)
    label = " ".join(repr(a) if not a or not a.isprintable() or " " in a else a for a in args)[:300]
    try:
        r = _in_subprocess(args, env, str(work)) if real_process else _timed(
            lambda: call(args, env=env, cwd=str(work)))
    except CallTimeout:
        tally.failures.append(f"hang (> {CALL_TIMEOUT:g} s): resumable {label}")
        return
    tally.calls += 1
    tally.subprocess_calls += real_process
    tally.codes[r.code] = tally.codes.get(r.code, 0) + 1
    if r.code:
        why = re.sub(r"[^a-z ]", "", r.err.split(":", 2)[1] if r.err.count(":") >= 2 else r.err)[:40]
        tally.reasons[why] = tally.reasons.get(why, 0) + 1
    after = disk(sandbox)
    problems = []
    if r.code not in EXIT_CODES:
        problems.append(f"exit {r.code}")
    if "internal error" in r.err or "Traceback" in r.err:
        problems.append("internal error")
    error_lines = [line for line in r.err.splitlines() if not line.startswith("resumable: warning: ")]
    verb = args[0] if args else ""
    sub = args[1] if verb == "checkpoint" and len(args) > 1 else ""
    step_output = verb == "run" and r.code == 1 and r.out  # a step failed: its report, not an error
    if r.code != 0 and not step_output and verb not in ("--help", "-h") and (
            len(error_lines) != 1 or not error_lines[0].startswith("resumable: ")):
        problems.append(f"not one error line: {r.err!r}"[:400])
    if RAW_CONTROL.search(r.err):
        problems.append(f"raw control character on stderr: {r.err!r}"[:300])
    html_out = verb == "report" and "-o" in args
    json_out = verb in ("get", "resume", "item", "resolve", "init") or "--json" in args or (
        verb == "checkpoint" and sub not in ("show", "", "-h", "--help"))
    stdout = r.out.decode("utf-8", "replace")
    if not json_out and not html_out and RAW_CONTROL.search(stdout):
        problems.append(f"raw control character on stdout: {r.out[:200]!r}")
    if json_out and not html_out and JSON_CONTROL.search(stdout):
        problems.append(f"raw control character in JSON on stdout: {r.out[:200]!r}")
    problems.extend(_what_was_answered_holds(args, sub, r, work))
    refused = r.code != 0 and not step_output
    read_only = verb in READ_ONLY or (verb == "checkpoint" and sub in CHECKPOINT_READ_ONLY)
    if (refused or read_only) and verb != "--help":
        changed = _allowed_difference(before, after)
        if changed:
            problems.append(f"exit {r.code} but changed on disk: {changed[:5]}")
    outside = sorted(set(os.listdir(sandbox.parent)) - {"template"} - {f"ex{i}" for i in range(4)})
    if outside:
        problems.append(f"wrote outside the sandbox: {outside}")
        for name in outside:
            remove(sandbox.parent / name)
    if (sandbox / "victim").read_bytes() != VICTIM:
        problems.append("wrote through a planted link (the victim changed)")
        (sandbox / "victim").write_bytes(VICTIM)
    if problems:
        tally.failures.append(f"resumable {label}: {'; '.join(problems)} [stderr: {r.err.strip()[:200]!r}]")


def _what_was_answered_holds(args: list[str], sub: str, r: Called, work: Path) -> list[str]:
    """What a success claims must be so: a checkpoint write acknowledged is a file every reader
    takes for valid; a document ``get`` prints is one the writers would accept."""
    import json

    if r.code != 0:
        return []
    if args[:1] == ["checkpoint"] and sub == "write":
        answer = json.loads(r.out)
        if not answer.get("success"):
            return []
        from resumable import ledger
        from resumable.ledger import yamlfmt

        if "--base-dir" not in args:
            return []
        path = work / args[args.index("--base-dir") + 1] / answer["checkpoint_path"]
        try:
            ledger.parse_checkpoint(yamlfmt.load(path.read_bytes()))
        except (ValueError, yamlfmt.YAMLError) as exc:  # CheckpointInvalid is a ValueError
            return [f"acknowledged a checkpoint that reads back corrupt: {str(exc)[:100]}"]
        return []
    if args[:1] == ["get"] and "--summary" not in args and not any(a in args for a in ("-h", "--help")):
        from resumable.core.model import shape_problem

        try:
            doc = json.loads(r.out)
        except ValueError:
            return ["get printed what is not JSON"]
        problem = shape_problem(doc) if isinstance(doc, dict) else "not an object"
        return [] if problem is None else [f"get exited 0 printing a malformed document: {problem}"]
    return []


def _reset_runs_mode(sandbox: Path) -> None:
    try:
        os.chmod(sandbox / "work" / "runs", 0o755)
    except OSError:
        pass


def fuzz(base: Path, *, examples: int, real_processes: int = 0, derandomize: bool = True,
         calls_per_example: int = 6) -> Tally:
    """Run ``examples`` hypothesis examples in process (and ``real_processes`` more with every call
    as a real `resumable` process); returns the tally. Failures are collected, not raised, so one
    bad call does not hide the others."""
    template = base / "template"
    build_template(template)
    tally = Tally()
    counter = [0]

    def one(corruptions: list[tuple[Any, ...]], calls: list[list[str]], real_process: bool) -> None:
        counter[0] += 1
        sandbox = base / f"ex{counter[0] % 4}"
        if sandbox.exists():
            _reset_runs_mode(sandbox)
            shutil.rmtree(sandbox)
        shutil.copytree(template, sandbox, symlinks=True)
        for op in corruptions:
            corrupt(op, sandbox)
        for args in calls:
            check_call(args, sandbox, tally, real_process=real_process)
        _reset_runs_mode(sandbox)

    scenario = (st.lists(corruption(), max_size=2), st.lists(argv(), min_size=1, max_size=calls_per_example))
    common_settings = dict(deadline=None, database=None, derandomize=derandomize,
                           suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])

    @settings(max_examples=examples, **common_settings)  # type: ignore[arg-type]
    @given(*scenario)
    def in_process(corruptions: list[tuple[Any, ...]], calls: list[list[str]]) -> None:
        one(corruptions, calls, False)

    for corruptions, calls in REGRESSIONS:
        in_process = example(corruptions, calls)(in_process)

    in_process()
    if real_processes:
        @settings(max_examples=real_processes, **common_settings)  # type: ignore[arg-type]
        @given(*scenario)
        def as_processes(corruptions: list[tuple[Any, ...]], calls: list[list[str]]) -> None:
            one(corruptions, calls[:3], True)

        as_processes()
    return tally


def r11_fuzz(base: Path, examples: int = 2000, real_processes: int = 150, derandomize: bool = False) -> Any:
    """The goal as the proof suite reports it (``goals.Result``)."""
    from .goals import Result

    started = time.monotonic()
    tally = fuzz(base, examples=examples, real_processes=real_processes, derandomize=derandomize)
    res = Result("R11", not tally.failures, "")
    for failure in tally.failures:
        res.fail(failure)
    codes = ", ".join(f"{n} x exit {c}" for c, n in sorted(tally.codes.items()))
    res.figure = (f"{tally.calls:,} CLI calls over every verb ({tally.calls - tally.subprocess_calls:,} in process,"
                  f" {tally.subprocess_calls:,} as real processes; {codes}) with hostile arguments and corrupted"
                  f" run files: {len(tally.failures)} with an internal error, a multi-line error, a hang, a change"
                  f" on disk by a refused call or a write through a planted link ({time.monotonic() - started:.0f} s)")
    return res
