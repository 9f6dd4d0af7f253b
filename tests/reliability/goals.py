"""The reliability goals R1-R6 and R9 as functions: ``goal(base_dir, **size) -> Result``.

The quick tier (pytest, every CI run) and the full tier (``python -m benchmarks.proof``) call the
same functions with different sizes, so what CI checks is what the full tier measures. No goal
here asserts on time: a loaded machine makes things slower, never wrong.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumable import api, fsio
from resumable.errors import CorruptRunError, ResumableError
from resumable.store.files import journal, snapshot

from . import harness as h


@dataclass
class Result:
    goal: str
    ok: bool
    figure: str
    failures: list[str] = field(default_factory=list)

    def fail(self, text: str) -> None:
        self.ok = False
        if len(self.failures) < 20:
            self.failures.append(text)


# --- R1: SIGKILL at random points of a writing process ----------------------------------------

_R1_STATES = ("in_progress", "done")


def r1_sigkill(base: Path, trials: int = 1000, seed: int = 1) -> Result:
    """Trials chain on one run per block of 100: each child resumes what the previous one left.
    Half the kills come at a random time, half at a random I/O call (to hit every code point)."""
    rng = random.Random(seed)
    res = Result("R1", True, "")
    block = 100
    expected_events: list[tuple[str, str]] = []
    runs = base
    checked = 0
    for t in range(trials):
        if t % block == 0:
            runs = base / f"r1-{t // block}"
            api.open_run("proof", runs_dir=runs).init("r1", units=[])
            expected_events = []
        ops = [(f"t{t}-u{i}", s) for i in range(30) for s in _R1_STATES]
        fresh = t % 2 == 0
        by_call = t % 4 < 2
        k = rng.randrange(1, 120)

        def body(ack: Any, ops: list[tuple[str, str]] = ops, fresh: bool = fresh,
                 by_call: bool = by_call, k: int = k, runs: Path = runs) -> None:
            if by_call:
                fsio.set_fault_hook(h.kill_at_call(k))
            run = api.open_run("proof", runs_dir=runs)
            for u, s in ops:
                if fresh:
                    run = api.open_run("proof", runs_dir=runs)
                run.unit(u, s)
                ack(f"{u} {s}")
            os.kill(os.getpid(), signal.SIGKILL)  # done before the kill: still a SIGKILL exit

        child = h.Child(body)
        if not by_call:
            time.sleep(rng.uniform(0, 0.02))
            child.kill()
        acks, status = child.wait()
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            res.fail(f"trial {t}: child ended with status {status}, not by SIGKILL")
            continue
        j = len(acks)
        try:
            doc = api.read_doc(runs / "proof.json")
            data = (runs / "proof.journal.jsonl").read_bytes()
            scan = journal.scan(data, base=0, path=runs / "proof.journal.jsonl", after_seq=0)
        except ResumableError as exc:
            res.fail(f"trial {t}: state does not load: {exc}")
            break
        events = [(e["unit"], e["state"]) for _seq, e in scan.records if e.get("t") == "unit"]
        got = events[len(expected_events):]
        if got not in (ops[:j], ops[: j + 1]):
            res.fail(f"trial {t}: journal after {j} acks holds {len(got)} events that are not"
                     f" a gap-free prefix of the writes")
            break
        units = doc.get("units") or {}
        for u, s in ops[:j]:
            if u not in units:
                res.fail(f"trial {t}: acknowledged {u} {s} missing")
        if j:
            last_u, last_s = ops[j - 1]
            st = (units.get(last_u) or {}).get("status")
            if st not in (last_s, "done"):
                res.fail(f"trial {t}: acknowledged {last_u} {last_s} reads back as {st}")
        expected_events += got
        checked += 1
    res.figure = f"{checked}/{trials} kills: acknowledged writes present, history a gap-free prefix, resumed"
    res.ok = res.ok and checked == trials
    return res


# --- R2: a crash at every I/O call k of a small run -------------------------------------------


def r2_crash_every_call(base: Path, shard: int = 0, shards: int = 1) -> Result:
    """Every crash point k = 1..total, or (``shards`` > 1) those with ``k % shards == shard``, so the
    points can be spread over test workers; the shards together cover every point."""
    states = h.reference_states(base, h.SMALL_OPS)
    total = h.count_calls(lambda: h.run_ops(base / "count", h.SMALL_OPS))
    res = Result("R2", True, "")
    good = 0
    points = range(1 + (shard - 1) % shards, total + 1, shards)
    for k in points:
        runs = base / f"k{k}"

        def body(ack: Any, k: int = k, runs: Path = runs) -> None:
            fsio.set_fault_hook(h.kill_at_call(k))
            h.run_ops(runs, h.SMALL_OPS, lambda i: ack(str(i)))

        acks, status = h.Child(body).wait()
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            res.fail(f"k={k}: child was not killed (status {status})")
            continue
        j = len(acks)
        try:
            got = h.load_state(runs / "proof.json")
        except ResumableError as exc:
            res.fail(f"k={k} (during {h.SMALL_OPS[j][0]}): reopening fails: {exc}")
            continue
        if not h.snapshot_parses(runs / "proof.json"):
            res.fail(f"k={k}: the snapshot file a seed reader (cat/jq) sees is not valid JSON")
            continue
        if got == states[j]:
            nxt = j
        elif j + 1 < len(states) and got == states[j + 1]:
            nxt = j + 1
        else:
            res.fail(f"k={k} (during {h.SMALL_OPS[j][0]}): state is neither the old nor the new")
            continue
        try:
            h.run_ops(runs, h.SMALL_OPS, start=nxt)
            final = h.load_state(runs / "proof.json")
        except ResumableError as exc:
            res.fail(f"k={k}: the next run cannot resume: {exc}")
            continue
        if final != states[-1]:
            res.fail(f"k={k}: resumed run ends in a different state")
            continue
        leftovers = [p.name for p in runs.rglob("*") if ".tmp." in p.name]
        if leftovers and nxt == len(states) - 1:
            pass  # a temp file of the killed process may remain until its name is reused
        good += 1
        shutil.rmtree(runs, ignore_errors=True)
    share = "" if shards == 1 else f" (k % {shards} == {shard} of {total} points)"
    res.figure = (f"{good}/{len(points)} crash points{share} give the old or the new state and resume"
                  f" ({100 * good // max(len(points), 1)}%)")
    res.ok = res.ok and good == len(points) and len(points) > 0
    return res


# --- R3: torn tail at every byte, flipped byte anywhere earlier --------------------------------


def r3_torn_and_flipped(base: Path, flip_records: int = 3) -> Result:
    src = base / "src"
    run = api.open_run("proof", runs_dir=src)
    run.init("r3", units=["a", "b"])
    for i in range(6):
        run.unit(f"u{i}", "in_progress")
        run.unit(f"u{i}", "done", note="x" * i)
    run.handle.writer.close()
    jpath = src / "proof.journal.jsonl"
    full = jpath.read_bytes()
    data = full.split(b"\0", 1)[0]
    offsets = [0]
    for line in data.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    nrec = len(offsets) - 1
    # The state after each prefix of records, from a journal-only replay.
    prefix_states = []
    for r in range(nrec + 1):
        d = base / f"prefix{r}"
        d.mkdir()
        (d / "proof.journal.jsonl").write_bytes(data[: offsets[r]])
        prefix_states.append(h.load_state(d / "proof.json") if r else None)
        shutil.rmtree(d)
    d = base / "snapbase"
    d.mkdir()
    (d / "proof.journal.jsonl").write_bytes(data[: offsets[nrec - 2]])
    snap_before_tail = snapshot.encode(api.read_doc(d / "proof.json"), nrec - 2, offsets[nrec - 2])
    res = Result("R3", True, "")
    cuts = 0
    start = offsets[nrec - 2]
    for cut in range(start, len(data)):
        complete = max(r for r in range(nrec + 1) if offsets[r] <= cut)
        # (snapshot?, padded?): padded, the bytes after the cut are zeros, as when a write into
        # the journal's padding was torn.
        for with_snapshot, padded in ((False, False), (True, False), (False, True)):
            d = base / "cut"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
            (d / "proof.journal.jsonl").write_bytes(data[:cut] + bytes(8192 if padded else 0))
            if with_snapshot:
                # The view as of the record before the last two (what a crash would leave).
                (d / "proof.json").write_bytes(snap_before_tail)
            try:
                got = h.load_state(d / "proof.json")
            except ResumableError as exc:
                res.fail(f"cut at byte {cut}: does not load: {exc}")
                continue
            if got != prefix_states[complete]:
                res.fail(f"cut at byte {cut}: recovered state is not the {complete}-record prefix")
                continue
            try:
                r = api.open_run("proof", runs_dir=d)
                r.unit("after", "done")
                r.handle.writer.close()
                after = (d / "proof.journal.jsonl").read_bytes()
                scan = journal.scan(after, base=0, path=d / "x", after_seq=0)
                if len(scan.records) != complete + 1 or scan.torn:
                    res.fail(f"cut at byte {cut}: next write left {len(scan.records)} records")
                    continue
            except ResumableError as exc:
                res.fail(f"cut at byte {cut}: next write fails: {exc}")
                continue
            cuts += 1
    # One flipped byte in an earlier (complete, not last) record: corruption, named precisely.
    flips = 0
    flip_total = 0
    for r in range(max(0, nrec - 1 - flip_records), nrec - 1):
        for pos in range(offsets[r], offsets[r + 1]):
            flip_total += 1
            d = base / "flip"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
            bad = bytearray(full)  # padding and all, as the writer left it
            bad[pos] ^= 0x01 if bad[pos] != 0x0B else 0x02  # never turn a byte into "\n"
            (d / "proof.journal.jsonl").write_bytes(bytes(bad))
            before = bytes(bad)
            msgs = []
            for attempt in ("read", "write"):
                try:
                    if attempt == "read":
                        api.read_doc(d / "proof.json")
                    else:
                        rr = api.open_run("proof", runs_dir=d)
                        try:
                            rr.unit("after", "done")
                        finally:
                            rr.handle.writer.close()
                    msgs.append(None)
                except CorruptRunError as exc:
                    msgs.append(str(exc))
            want = f"offset {offsets[r]}"
            if not all(m is not None and "\n" not in m and str(d / "proof.journal.jsonl") in m
                       and want in m for m in msgs):
                res.fail(f"flip at byte {pos} (record {r + 1}): got {msgs!r}, want one line naming"
                         f" the file and {want}")
                continue
            if (d / "proof.journal.jsonl").read_bytes() != before or (d / "proof.json").exists():
                res.fail(f"flip at byte {pos}: something was rewritten after corruption")
                continue
            flips += 1
    total_cuts = 3 * (len(data) - start)
    res.figure = (f"{cuts}/{total_cuts} tail cuts recover the exact prefix and accept the next write;"
                  f" {flips}/{flip_total} flipped bytes give a one-line error naming file+offset")
    res.ok = res.ok and cuts == total_cuts and flips == flip_total
    return res


# --- R4: simulated power loss ------------------------------------------------------------------


def r4_power_loss(base: Path, trials: int = 1000, seed: int = 4) -> Result:
    states = h.reference_states(base, h.SMALL_OPS)
    (base / "count").mkdir()  # as each trial's directory is: no mkdir call
    total = h.count_calls(lambda: h.run_ops(base / "count", h.SMALL_OPS))
    rng = random.Random(seed)
    res = Result("R4", True, "")
    good = 0
    with h.no_fsync():
        for t in range(trials):
            runs = base / f"t{t}"
            runs.mkdir()
            k = rng.randrange(1, total + 1)
            acked: list[int] = []
            rec = h.PowerLossRecorder(runs, k, rng, base / f"img{t}")
            prev = fsio.set_fault_hook(rec)
            try:
                h.run_ops(runs, h.SMALL_OPS, acked.append)
                res.fail(f"trial {t}: power loss point {k} never reached")
                continue
            except h.PowerLoss:
                pass
            finally:
                fsio.set_fault_hook(prev)
            j = len(acked)
            img = base / f"img{t}"
            try:
                got = h.load_state(img / "proof.json")
            except ResumableError as exc:
                res.fail(f"trial {t} (k={k}, during {h.SMALL_OPS[j][0]}): does not load: {exc}")
                continue
            if not h.snapshot_parses(img / "proof.json"):
                res.fail(f"trial {t} (k={k}): the snapshot file seed readers see is not valid JSON")
                continue
            if got == states[j]:
                nxt = j
            elif got == states[j + 1]:
                nxt = j + 1
            else:
                res.fail(f"trial {t} (k={k}, during {h.SMALL_OPS[j][0]}): an acknowledged write is"
                         " missing or the state is a mix")
                continue
            try:
                h.run_ops(img, h.SMALL_OPS, start=nxt)
                if h.load_state(img / "proof.json") != states[-1]:
                    res.fail(f"trial {t}: the resumed run ends in a different state")
                    continue
            except ResumableError as exc:
                res.fail(f"trial {t}: cannot resume after the power loss: {exc}")
                continue
            good += 1
            shutil.rmtree(runs, ignore_errors=True)
            shutil.rmtree(img, ignore_errors=True)
    res.figure = f"{good}/{trials} simulated power losses keep every acknowledged write ({total} crash points)"
    res.ok = res.ok and good == trials
    return res


# --- R5: ENOSPC / EIO at every call k ----------------------------------------------------------

R5_COMMANDS: list[tuple[str, list[str]]] = [
    ("init", ["init", "proof", "--task", "r5", "--units", "a,b"]),
    ("unit", ["unit", "proof", "a", "in_progress", "--note", "n"]),
    ("item", ["item", "proof", "--json", '{"id": "i1", "msg": "m"}']),
    ("finalize", ["finalize", "proof", "aborted", "--result", "r"]),
    ("re-init", ["init", "proof", "--task", "again", "--units", "x"]),
]


def _cli(args: list[str], runs: Path, fault: str | None, log: Path | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RESUMABLE_DIR=str(runs))
    env.pop("PROOF_FAULT", None)
    if fault:
        env["PROOF_FAULT"] = fault
    if log is not None:
        env["PROOF_FAULT_LOG"] = str(log)
    env["PROOF_FAULT_SAVE"] = str(runs.parent / "faultsave")  # same filesystem: hard links
    return subprocess.run([sys.executable, str(h.FAULT_CHILD), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def r5_enospc_eio(base: Path, commands: tuple[str, ...] | None = None,
                  errnos: tuple[str, ...] = ("ENOSPC", "EIO")) -> Result:
    res = Result("R5", True, "")
    names = [n for n, _ in R5_COMMANDS]
    chosen = [i for i, n in enumerate(names) if commands is None or n in commands]
    # Templates: the runs dir before each command, built fault-free through the CLI itself.
    templates: list[Path] = []
    d = base / "tpl"
    d.mkdir()
    for i, (_n, args) in enumerate(R5_COMMANDS):
        t = base / f"tpl{i}"
        shutil.copytree(d, t, symlinks=True)
        templates.append(t)
        p = _cli(args, d, None, None)
        if p.returncode != 0:
            res.fail(f"template command {args} failed: {p.stderr.strip()}")
            return res
    tried = good = 0
    for i in chosen:
        args = R5_COMMANDS[i][1]
        probe = base / "probe"
        shutil.rmtree(probe, ignore_errors=True)
        shutil.copytree(templates[i], probe, symlinks=True)
        log = base / "probe.log"
        log.unlink(missing_ok=True)
        _cli(args, probe, None, log)
        ncalls = len(log.read_text().splitlines())
        before_ref = h.load_state(templates[i] / "proof.json")
        after_ref = h.load_state(probe / "proof.json")
        for k in range(1, ncalls + 1):
            for code in errnos:
                for persist in (False, True):
                    tried += 1
                    label = f"{R5_COMMANDS[i][0]} k={k} {code}{' persistent' if persist else ''}"
                    runs = base / "case"
                    shutil.rmtree(runs, ignore_errors=True)
                    shutil.copytree(templates[i], runs, symlinks=True)
                    log.unlink(missing_ok=True)
                    p = _cli(args, runs, f"{k}:{code}{':persist' if persist else ''}", log)
                    err_lines = p.stderr.splitlines()
                    ok = True
                    if p.returncode not in (0, 1) or "Traceback" in p.stderr:
                        res.fail(f"{label}: exit {p.returncode}: {p.stderr.strip()[-200:]}")
                        continue
                    if p.returncode == 1 and (len(err_lines) != 1 or not err_lines[0].startswith("resumable: ")):
                        res.fail(f"{label}: stderr is not one line: {p.stderr!r}")
                        ok = False
                    try:
                        got = h.load_state(runs / "proof.json")
                    except ResumableError as exc:
                        res.fail(f"{label}: state does not load: {exc}")
                        continue
                    # Exit 1 with "saved in the journal, but the snapshot file is stale": the write is
                    # acknowledged (durable in the journal); only the cat-able view lags behind.
                    saved = p.returncode == 0 or "was saved in the journal" in p.stderr
                    want = after_ref if saved else before_ref
                    if got != want:
                        res.fail(f"{label}: exit {p.returncode} but the state is the "
                                 f"{'new' if got == after_ref else 'old' if got == before_ref else 'mixed'} one"
                                 f" ({p.stderr.strip()})")
                        ok = False
                    ops = [line.split(" ", 2) for line in log.read_text().splitlines()]
                    failed_fsync: set[str] = set()
                    for op, outcome, path in ops:
                        if op == "fsync" and path in failed_fsync:
                            res.fail(f"{label}: fsync of {path} retried after it failed")
                            ok = False
                        if op == "fsync" and outcome == "fail":
                            failed_fsync.add(path)
                        elif op != "fsync":
                            failed_fsync.discard(path) if op == "open" else None
                    # The next good command finishes the job and leaves no temp file.
                    if p.returncode == 1 and not saved:
                        q = _cli(args, runs, None, None)
                        if q.returncode != 0:
                            res.fail(f"{label}: the next good command fails: {q.stderr.strip()}")
                            continue
                    else:
                        q = _cli(["get", "proof", "--summary"], runs, None, None)
                    left = sorted(p2.name for p2 in runs.rglob("*") if ".tmp" in p2.name)
                    if left:
                        res.fail(f"{label}: temp files left after the next good command: {left}")
                        ok = False
                    if h.load_state(runs / "proof.json") != after_ref:
                        res.fail(f"{label}: after the next good command the state is wrong")
                        ok = False
                    good += ok
    res.figure = (f"{good}/{tried} injected faults (every call k x {'/'.join(errnos)} x once/persistent):"
                  " one-line error, last acknowledged state, no temp files, no fsync retried")
    res.ok = res.ok and good == tried
    return res


# --- R6: concurrent writers ------------------------------------------------------------------


def r6_concurrent(base: Path, writers: int = 16, each: int = 1000, *, unsafe: bool = False) -> Result:
    runs = base / ("unsafe" if unsafe else "safe")
    api.open_run("proof", runs_dir=runs).init("r6", units=[])
    children = []
    for w in range(writers):

        def body(ack: Any, w: int = w) -> None:
            if unsafe:  # the negative control: writers without their flock (this child only)
                import fcntl

                fcntl.flock = lambda *_: None  # type: ignore[assignment]
            run = api.open_run("proof", runs_dir=runs)
            for j in range(each):
                run.unit(f"w{w}", "in_progress", note=str(j))
            ack("done")

        children.append(h.Child(body, quiet=unsafe))
    crashed = 0
    for c in children:
        acks, status = c.wait()
        if status != 0 or acks != ["done"]:
            crashed += 1
    res = Result("R6" + (" negative control" if unsafe else ""), True, "")
    try:
        data = (runs / "proof.journal.jsonl").read_bytes()
        scan = journal.scan(data, base=0, path=runs / "proof.journal.jsonl", after_seq=0)
    except CorruptRunError as exc:
        res.fail(f"journal corrupt: {exc}")
        res.figure = f"journal corrupt ({crashed} writers crashed)"
        return res
    seen: dict[str, list[int]] = {}
    for _seq, e in scan.records:
        if e.get("t") == "unit":
            seen.setdefault(e["unit"], []).append(int(e["note"]))
    lost = dup = 0
    for w in range(writers):
        notes = seen.get(f"w{w}", [])
        dup += len(notes) - len(set(notes))
        lost += each - len(set(notes))
        if notes != sorted(notes):
            res.fail(f"writer {w}: its writes are out of order")
    if lost or dup or crashed:
        res.fail(f"{lost} lost, {dup} duplicated, {crashed} writers crashed")
    res.figure = (f"{writers}x{each} transitions: {lost} lost, {dup} duplicated, {crashed} writers"
                  f" crashed, {len(scan.records)} records gap-free")
    return res


def r6_with_control(base: Path, writers: int = 16, each: int = 1000, control_each: int = 200) -> Result:
    safe = r6_concurrent(base, writers, each)
    control = r6_concurrent(base, writers, control_each, unsafe=True)
    res = Result("R6", safe.ok and not control.ok,
                 f"{safe.figure}; locking disabled: {control.figure} (the control must fail:"
                 f" {'it did' if not control.ok else 'it did NOT'})", safe.failures)
    return res


# --- R9: malformed inputs --------------------------------------------------------------------


def _in_process(argv: list[str]) -> tuple[int, str, str]:
    from resumable.cli.main import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # a traceback in real life
            import traceback

            err.write("Traceback (most recent call last):\n" + "".join(traceback.format_exception(exc)))
            code = 99
    out.flush()
    err.flush()
    return (code, out.buffer.getvalue().decode("utf-8", "replace"),  # type: ignore[attr-defined]
            err.buffer.getvalue().decode("utf-8", "replace"))  # type: ignore[attr-defined]


_BAD_IDS = ["..", "../outside/victim", "/abs/x", "a\x00b", "x" * 300, "", " ", "a/b", ".hidden",
            "bad\udcffutf8", "a b", "a\nb", "../../etc/passwd", "runs/../../outside/x", "\ufeffbom"]
# Unit ids are document keys, not paths: the seed contract rejects only empty ids, commas and
# whitespace (and resumable a length limit); ".." or "/" in a unit id is legal and harmless.
_BAD_UNIT_IDS = [" ", "", "a b", "a,b", "a\nb", "tab\tid", "u" * 300, "x" * 5000]
# Not JSON at all (or not strict JSON): refused by every verb taking JSON.
_BAD_JSON = ['{"a": ', "NaN", '{"a": NaN}', '{"a": Infinity}', '{"a": 1e999}', "-1e999",
             "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000,
             '\ufeff{"a": 1}', '{"a": "\udcff"}', "", "{,}", '{"a": 1,}', "{'a': 1}", '{"a": 1}}']
# Valid JSON of the wrong type: item pushes any value verbatim and resolve takes str(value), as
# the seed does (seed contract), so only --launch (an object) refuses these.
_WRONG_TYPE_JSON = ['"string"', "5", "null", "[1, 2]", "[{}, 3]", "1" + "0" * 400,
                    '{"scriptPath": 5}', '{"scriptPath": ""}', '{"scriptPath": "x", "args": []}',
                    '{"kind": "resumable", "argv": []}', '{"kind": "resumable", "argv": [1]}']
_BAD_SNAPSHOTS: list[bytes] = [
    b'{"schemaVersion": 2, "id": "bad", "units": {', b"[1, 2, 3]", b'"text"', b"",
    b'{"schemaVersion": 2, "units": {"a": NaN}}', b'{"n": 1e999}',
    b"[" * 5000 + b"]" * 5000, b'{"task": "\xff\xfe bad utf-8"}', b'\xef\xbb\xbf{"schemaVersion": 2}',
    b"\x00\x00\x00", b'{"a": 1}{"b": 2}',
]
# Documents that parse but have wrong types where the contract needs a shape.
_WRONG_TYPED: list[bytes] = [
    b'{"schemaVersion": 2, "id": "bad", "status": "running", "units": 5}',
    b'{"schemaVersion": 2, "id": "bad", "status": 7, "units": {}}',
    b'{"schemaVersion": "two", "id": "bad", "status": "running", "units": {}}',
    b'{"schemaVersion": 2, "id": "bad", "status": "running", "units": {"a": "done"}, "openItems": 3}',
    b'{"schemaVersion": 2, "id": "bad", "status": "running", "units": [], "phases": []}',
    b'{"n": ' + b"9" * 400 + b"}",
    b'{"schemaVersion": ' + b"9" * 400 + b', "id": "bad", "status": "running", "units": {}}',
]
_JOBS = [
    "[job\nname = 'x'", "[job]\nname = 5\n[steps.a]\nrun = 'true'", "[steps.a]\nrun = 5",
    "[steps.a]\nrun = 'true'\nneeds = ['zz']",
    "[steps.a]\nrun = 'true'\nneeds = ['b']\n[steps.b]\nrun = 'true'\nneeds = ['a']",
    "[steps.a]\nrun = 'true'\ntimeout = 'soon'", "[steps.a]\nrun = 'true'\nretries = -1",
    "[steps.'..']\nrun = 'true'", "[steps.a]\nrun = ''", "[steps.a]\nrun = 'true'\nbogus = 1",
    "[job]\nbogus = 1\n[steps.a]\nrun = 'true'", "steps = 5", "", "[steps]",
    "[steps.a]\nrun = 'true'\nenv = { A = 1 }", "[steps.a]\nrun = 'true'\nshell = 'sh'",
    "[steps.a]\nrun = 'true'\ntimeout = nan", "[steps.a]\nrun = 'true'\ntimeout = 1e999",
    "[steps.a]\nrun = 'true'\nneeds = 'b'", "[steps.a]\nrun = 'true'\nartifacts = [1]",
    "\ufeff[steps.a]\nrun = 'true'", "[steps.a]\nrun = 'true'\nretries = 99999999999999999999",
]


def _r9_cases(rng: random.Random, n: int, wrong_typed: str) -> list[tuple[str, list[str], bytes | None, str | None]]:
    """(kind, argv, snapshot bytes for run 'bad' or None, job file text or None)."""
    verbs_run = [["get", "{run}"], ["resume", "{run}"], ["unit", "{run}", "a", "done"],
                 ["phase", "{run}", "p", "done"], ["finalize", "{run}", "done"],
                 ["item", "{run}", "--json", '{"m": 1}'], ["validation", "{run}", "green"],
                 ["init", "{run}", "--task", "t"]]
    base_cases: list[tuple[str, list[str], bytes | None, str | None]] = []
    for bad in _BAD_IDS:
        for v in verbs_run:
            base_cases.append(("run id", [a.replace("{run}", bad) for a in v], None, None))
        base_cases.append(("state", ["unit", "live", "a", bad], None, None))
        base_cases.append(("phase state", ["phase", "live", "p", bad], None, None))
    for bad in _BAD_UNIT_IDS:
        base_cases.append(("unit id", ["unit", "live", bad, "done"], None, None))
        if len(bad) > 256:
            base_cases.append(("dep id", ["unit", "live", "a", "pending", "--deps", bad], None, None))
    for v in verbs_run:
        base_cases.append(("symlink escape", [a.replace("{run}", "evil") for a in v], None, None))
    for js in _BAD_JSON:
        base_cases.append(("json arg", ["item", "live", "--json", js], None, None))
        base_cases.append(("json arg", ["resolve", "live", "--json", js], None, None))
        base_cases.append(("json arg", ["init", "new1", "--task", "t", "--launch", js], None, None))
    for js in _WRONG_TYPE_JSON:
        base_cases.append(("launch type", ["init", "new1", "--task", "t", "--launch", js], None, None))
    for snap in _BAD_SNAPSHOTS:
        for v in verbs_run[:7]:
            base_cases.append(("document", [a.replace("{run}", "bad") for a in v], snap, None))
    if wrong_typed != "exclude":
        for snap in _WRONG_TYPED:
            for v in verbs_run[2:7]:  # write verbs; reads of such files are null-safe by design
                base_cases.append(("wrong-typed document", [a.replace("{run}", "bad") for a in v], snap, None))
    if wrong_typed == "only":
        base_cases = [c for c in base_cases if c[0] == "wrong-typed document"]
        return base_cases
    for job in _JOBS:
        base_cases.append(("job file", ["run", "{job}", "--state-dir", "{runs}"], None, job))
    base_cases += [
        ("usage", ["unit", "live"], None, None), ("usage", ["unit", "live", "a", "done", "--bogus"], None, None),
        ("usage", ["finalize", "live", "done"], None, None),  # refused: units not done
        ("usage", ["init", "live", "--task", "again"], None, None),  # live: refused
    ]
    cases = list(base_cases)
    valid_item = '{"id": "i9", "msg": "hello", "nested": {"k": [1, 2, 3]}}'
    valid_doc = (b'{"schemaVersion": 2, "id": "bad", "task": "t", "status": "running", "units": '
                 b'{"a": {"status": "pending", "dependsOn": [], "note": ""}}, "phases": {}}')
    while len(cases) < n:
        r = rng.randrange(5)
        if r == 0:  # a valid JSON argument truncated at a random byte
            cut = rng.randrange(0, len(valid_item) - 1)
            cases.append(("truncated json", ["item", "live", "--json", valid_item[:cut]], None, None))
        elif r == 1:  # a valid document truncated at a random byte
            cut = rng.randrange(0, len(valid_doc) - 1)
            cases.append(("truncated document", [*rng.choice(verbs_run[:7])], valid_doc[:cut], None))
        elif r == 2:  # a random bad id in a random verb and position
            if rng.random() < 0.5:
                bad = rng.choice(_BAD_IDS) + rng.choice(["", "/x", "\x00", ".."])
                cases.append(("run id", [rng.choice(["unit", "get", "phase"]), bad, "a", "done"], None, None))
            else:
                bad = rng.choice(_BAD_UNIT_IDS) + rng.choice(["", " x", ",y"])
                cases.append(("unit id", ["unit", "live", bad, rng.choice(["done", "pending"])], None, None))
        elif r == 3:
            base = rng.choice(base_cases)
            cases.append(base)
        else:  # an invalid UTF-8 byte or NUL spliced into a valid document
            pos = rng.randrange(1, len(valid_doc) - 1)
            bad_byte = rng.choice([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"])
            cases.append(("bad bytes in document", [*rng.choice(verbs_run[:7])],
                          valid_doc[:pos] + bad_byte + valid_doc[pos:], None))
    return [(k, [a.replace("{run}", "bad") for a in argv], s, j) for k, argv, s, j in cases[:n]]


def r9_malformed(base: Path, n: int = 10000, subprocess_sample: int = 40, seed: int = 9,
                 wrong_typed: str = "include") -> Result:
    """``wrong_typed``: include | exclude | only the write verbs on parseable documents whose
    fields have the wrong types (writes refuse those; reads show them)."""
    rng = random.Random(seed)
    sb = base / "sb"
    runs = sb / "runs"
    outside = sb / "outside"
    outside.mkdir(parents=True)
    live = api.open_run("live", runs_dir=runs)
    live.init("r9", units=["a", "b"])
    live.handle.writer.close()
    victim = api.open_run(str(outside / "victim.json"), runs_dir=runs)
    victim.init("victim", units=["a"])
    victim.handle.writer.close()
    os.symlink(outside / "victim.json", runs / "evil.json")
    os.symlink(outside / "victim.journal.jsonl", runs / "evil.journal.jsonl")
    (outside / "job.toml").write_text("")
    cases = _r9_cases(rng, n, wrong_typed)
    res = Result("R9", True, "")
    good = 0
    failed_kinds: dict[str, int] = {}
    skip = lambda p: p.name.endswith(".lock") or p.name == "job.toml"  # noqa: E731 - owned by the command
    clean = h.tree_state(sb, skip=skip)
    pristine = base / "pristine"
    shutil.copytree(sb, pristine, symlinks=True)
    old_env = os.environ.get("RESUMABLE_DIR")
    os.environ["RESUMABLE_DIR"] = str(runs)
    cwd = os.getcwd()
    os.chdir(sb)
    sample = set(rng.sample(range(len(cases)), min(subprocess_sample, len(cases))))
    try:
        for idx, (kind, argv, snap, job) in enumerate(cases):
            if snap is not None:
                (runs / "bad.json").write_bytes(snap)
            if job is not None:
                (outside / "job.toml").write_text(job)
                argv = [a.replace("{job}", str(outside / "job.toml")).replace("{runs}", str(runs)) for a in argv]
            before = h.tree_state(sb, skip=skip)
            if idx in sample and "\x00" not in "".join(argv) and "\udcff" not in "".join(argv):
                p = subprocess.run([sys.executable, "-m", "resumable", *argv], capture_output=True,
                                   text=True, env=dict(os.environ), timeout=60)
                code, err = p.returncode, p.stderr
            else:
                code, _out, err = _in_process(argv)
            after = h.tree_state(sb, skip=skip)
            lines = err.splitlines()
            label = f"{kind} {argv!r}"[:160]
            good_before = good
            if "Traceback" in err or code not in (1, 2):
                res.fail(f"{label}: exit {code}, stderr {err.strip()[-160:]!r}")
            elif code != 0 and (len(lines) != 1 or not lines[0].startswith("resumable: ")):
                res.fail(f"{label}: stderr is not exactly one line: {err[:160]!r}")
            elif code != 0 and after != before:
                changed = sorted(set(after.items()) ^ set(before.items()), key=repr)[:3]
                res.fail(f"{label}: exit {code} but the disk changed: {[c[0] for c in changed]}")
            else:
                good += 1
            if good == good_before:
                failed_kinds[kind] = failed_kinds.get(kind, 0) + 1
            if after != before:
                changed = {k for k in set(after) | set(before) if after.get(k) != before.get(k)}
                if not all(k.startswith("runs/bad") for k in changed):
                    res.fail(f"{label}: changed files it does not own: {sorted(changed)[:3]}")
            if after != clean:  # back to the pristine sandbox for the next case
                shutil.rmtree(sb)
                shutil.copytree(pristine, sb, symlinks=True)
    finally:
        os.chdir(cwd)
        if old_env is None:
            os.environ.pop("RESUMABLE_DIR", None)
        else:
            os.environ["RESUMABLE_DIR"] = old_env
    res.figure = (f"{good}/{len(cases)} malformed inputs: exit 1/2, one stderr line, no traceback,"
                  f" nothing else changed ({len(sample)} as real subprocesses)"
                  + (f"; failing: {failed_kinds}" if failed_kinds else ""))
    res.ok = res.ok and good == len(cases)
    return res
