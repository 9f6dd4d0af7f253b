"""What the fuzz suite (``fuzz.py``, R11) feeds the command line: the sandbox each example starts
from, the ways its files are damaged, and the arguments of every verb (hypothesis strategies).

Nothing generated can reach outside the sandbox: path arguments come from a vocabulary of names
inside it, generated text never holds ".." or starts with "/" or "~", and step commands come from a
short list of harmless ones.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

VICTIM = b"a file outside the runs directory: never written through a planted link\n"


# --- the sandbox ---------------------------------------------------------------------------------

GOOD_JOB = """[job]
name = "job"
grace = "0.2s"
[steps.a]
run = "echo a"
[steps.b]
run = ["true"]
needs = ["a"]
"""

FAILING_JOB = """[job]
name = "failing"
[steps.a]
run = "printf '\\\\033]0;title\\\\007\\\\033[2J\\\\r\\\\n'; exit 3"
[steps.b]
run = "true"
needs = ["a"]
"""

HARMLESS = ("true", "false", "echo hi", "exit 3", "printf '\\033]0;t\\007\\r\\n'", "echo $RESUMABLE_STEP",
            "echo x >&2", "test -e nothing-here")


def build_template(root: Path) -> None:
    """The sandbox every example starts from (copied per example)."""
    from resumable import api

    work = root / "work"
    runs = work / "runs"
    (work / "sub").mkdir(parents=True)
    runs.mkdir(mode=0o755)
    (root / "home").mkdir()
    (root / "victim").write_bytes(VICTIM)
    (work / "job.toml").write_text(GOOD_JOB)
    (work / "failing.toml").write_text(FAILING_JOB)
    (work / "bad.toml").write_text("[job\nname = ")
    (work / "huge.toml").write_text(f'[job]\nname = "huge"\ntimeout = {"9" * 400}\n[steps.a]\nrun = "true"\n')
    r = api.open_run("r", runs_dir=runs)
    r.init("live run \x1b]0;t\x07", units=["a", "b", "c"], required_phases=["build"])
    r.unit("a", "done", note="ok")
    r.unit("b", "failed", note="exit \x9b2J 1")
    r.unit("c", "pending", deps=["a", "b"])
    r.phase("build", "running")
    r.item({"issue": "x", "severity": "high"})
    r.close()
    d = api.open_run("d", runs_dir=runs)
    d.init("finished", units=["x"])
    d.unit("x", "done")
    d.finalize("done", result="ok")
    d.close()
    old = runs / "d.json"
    os.utime(old, (time.time() - 30 * 86400,) * 2)
    (runs / "s.json").write_text('{"id": "s", "task": "seed", "status": "running", "units": {"u": {"status": '
                                 '"done"}}, "openItems": [], "resolvedItems": []}\n')
    (runs / "stray.json").write_text("not json at all")
    from resumable import ledger

    for phase, payload in (("implement", {"branch_name": "feat/x", "commit_sha": "a1b2c3d"}),
                           ("local_review", {"iteration_count": 1, "last_clean_sha": "b2c3d4e"})):
        ledger.write("T", "a1b2c3d4", phase, payload, artifact_paths=["job.toml"], base_dir=work / "ck")


# --- corruption ------------------------------------------------------------------------------------

TARGETS = ("r.json", "r.journal.jsonl", "r.lock", "d.json", "d.journal.jsonl", "s.json", "r.runner.lock",
           "job.runner.lock", "archive", "r", "job", "x.json", "x.journal.jsonl")

WRONG_DOCS = (b"null", b"[]", b'"text"', b"12", b'{"units": null}', b'{"units": [1, 2]}', b'{"status": ["x"]}',
              b'{"units": {"a": null, "b": "done", "c": {"status": 7}}}', b'{"openItems": {"a": 1}}',
              b'{"phases": "x", "currentPhase": 3, "validation": []}', b'{"units": {"a": {"attempts": "x"}}}',
              b'{"units": {"a": {"attempts": [{"n": "1", "duration": 1e308}]}}, "createdAt": 5}',
              b'{"id": "../../x", "task": null, "updatedAt": "9999-99-99"}', b'{"launch": {"argv": [1]}}',
              b'{"schemaVersion": 2, "id": "r", "units": 5}', b'{"id": "r", "units": {}, "resolvedItems": 7}',
              b"\xef\xbb\xbf{}", b'{"a": 1e999}', b'["\\ud800"]', b"{" * 3000)


# Names in the checkpoint ledger (work/ck): the ticket, its run (a1b2c3d4's UUID), its checkpoints.
LEDGER_RUN = "T/4fa2159f-9c61-5f8b-9ae5-28692b46cbd7"
LEDGER_TARGETS = (f"{LEDGER_RUN}/phase_1_implement_a2.yaml", f"{LEDGER_RUN}/phase_1_implement_a1.yaml",
                  f"{LEDGER_RUN}/phase_3_create_pr_a1.yaml", LEDGER_RUN, "T/7c9e6679-7425-40de-944b-e07fc1f90ae7", "T")


def _path(runs: Path, name: str) -> Path:
    return runs / name


def corrupt(op: tuple[Any, ...], sandbox: Path) -> None:
    runs = sandbox / "work" / "runs"
    kind, name = op[0], op[1]
    p = _path(runs, name)
    if kind == "ledger":  # a planted entry in the checkpoint ledger
        kind, p = op[2], sandbox / "work" / "ck" / name
        op = (kind, name, True)
        p.parent.mkdir(parents=True, exist_ok=True)
    try:
        if kind == "flip" and p.is_file() and not p.is_symlink():
            data = bytearray(p.read_bytes())
            if data:
                i = op[2] % len(data)
                data[i] ^= 1 << (op[3] % 8)
                p.write_bytes(bytes(data))
        elif kind == "lastbyte" and p.is_file() and not p.is_symlink():
            whole = p.read_bytes()
            if whole:
                p.write_bytes(whole[:-1] + bytes([op[2] % 256]))
        elif kind == "truncate" and p.is_file() and not p.is_symlink():
            whole = p.read_bytes()
            p.write_bytes(whole[: op[2] % (len(whole) + 1)])
        elif kind == "append" and p.is_file() and not p.is_symlink():
            with open(p, "ab") as f:
                f.write(op[2])
        elif kind == "replace":
            remove(p)
            p.write_bytes(op[2])
        elif kind == "fifo":
            remove(p)
            os.mkfifo(p)
        elif kind == "link":
            remove(p)
            p.symlink_to(sandbox / ("victim" if op[2] else "work"))
        elif kind == "dir":
            remove(p)
            p.mkdir()
        elif kind == "remove":
            remove(p)
        elif kind == "doc":
            remove(p)
            p.write_bytes(op[2])
        elif kind == "chmod":
            os.chmod(runs, 0o755 | (0o020 if op[2] else 0o002))
        elif kind == "garbage":
            remove(p)
            p.write_bytes(b"phase: [not yaml\n")
    except OSError:
        pass


def remove(p: Path) -> None:
    if p.is_symlink() or p.is_file() or (p.exists() and not p.is_dir()):
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)


def corruption() -> st.SearchStrategy[tuple[Any, ...]]:
    name = st.sampled_from(TARGETS)
    return st.one_of(
        st.tuples(st.just("flip"), name, st.integers(0, 1 << 20), st.integers(0, 7)),
        st.tuples(st.just("truncate"), name, st.integers(0, 1 << 20)),
        st.tuples(st.just("lastbyte"), name, st.integers(0, 255)),
        st.tuples(st.just("append"), name, st.binary(max_size=200) | st.sampled_from(
            [b"x", b"\n", b"\0" * 64, b'{"v":1,"seq":99,"t":"unit","crc":"00000000"}\n', b'{"v":9}\n'])),
        st.tuples(st.just("replace"), name, st.binary(max_size=300)),
        st.tuples(st.just("fifo"), name),
        st.tuples(st.just("link"), name, st.booleans()),
        st.tuples(st.just("dir"), name),
        st.tuples(st.just("remove"), name),
        st.tuples(st.just("doc"), st.sampled_from(("r.json", "s.json", "x.json", "d.json")),
                  st.sampled_from(WRONG_DOCS)),
        st.tuples(st.just("chmod"), st.just("runs"), st.booleans()),
        st.tuples(st.just("ledger"), st.sampled_from(LEDGER_TARGETS),
                  st.sampled_from(("fifo", "dir", "link", "garbage", "remove"))),
    )


# --- arguments -------------------------------------------------------------------------------------

HOSTILE_TEXT = ("", " ", "\x1b]0;pwned\x07", "a\x1b[2Jb", "\r\n", "x\ny", "\x9b31m", "\u202e", "\udcff", "\t",
                "x" * 300, "é" * 200, "{{DATA}}", "--", "-", "--dir", "--json", "-o", "a,b,,c", ",", "$(true)",
                "'", '"', "\\", "%s%n", "\x7f", "\u2028")
IDS = ("r", "d", "s", "x", "stray", "job", "failing", "nosuch", "r.json", "runs/r.json", "sub/n.json", "s.json",
       "R", "r.", ".r", "-r", "a" * 129, "a" * 128, "..", "r..x", "r/x", "x.json.json", "~", "~/h.json")
UNITS = ("a", "b", "c", "u", "new", "a,b", "x" * 257, "x" * 256, "u\x1b[31m", "", "--note")
STATES = ("pending", "in_progress", "done", "blocked", "dep_blocked", "failed", "timeout", "interrupted",
          "running", "skipped", "DONE", "green", "red", "pass", "ok", "fail", "needs_attention", "aborted")
JSONS = ('{"a":1}', "[]", '[{"issue":"x"},{"issue":"x"}]', "{}", "null", "1", '"s"', '{"a":"\\ud800"}',
         '["\\udfff"]', "[" * 250 + "]" * 250, '{"a":1e999}', "NaN", "{", '{"a":' + "9" * 5000 + "}",
         '{"scriptPath":"x","args":{}}', '{"kind":"resumable","argv":["resumable","run"]}', '{"id":"f-x"}')
NUMBERS = ("0", "1", "-1", "7", "1.5", "1e308", "9" * 400, "nan", "inf", "-inf", "0x10", "", "1e-400", " 3 ")
DIRS = ("runs", "./runs", "sub/../runs", "other", "sub", "~/runs", "job.toml", "runs/r.json", "x" * 300,
        "runs/archive", "a\x1b[2J", "")
DURATIONS = ("0", "0.05", "10ms", "1s", "5m", "-1", "abc", "9" * 400, "1e400", "nan", "inf", "", "1.5h", "90 s")
SMALL_DURATIONS = ("0", "0.01", "1ms", "-1", "abc", "9" * 400, "1e400", "nan", "")


def _safe(text: str) -> bool:
    return ".." not in text and not text.startswith(("/", "~")) and "\x00" not in text


def token() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40).filter(_safe))


def pick(options: tuple[str, ...], good: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Mostly values that get a verb past its argument checks (so the store is reached), else the
    vocabulary of hostile ones or generated text."""
    return st.one_of(*[st.sampled_from(good)] * 6 * bool(good), st.sampled_from(options), token())


def _opts(pairs: list[tuple[str, st.SearchStrategy[str]]], flags: tuple[str, ...] = (),
          required: list[tuple[str, st.SearchStrategy[str]]] = ()) -> st.SearchStrategy[list[str]]:  # type: ignore[assignment]
    """Options in any order: each required one (mostly present), some optional ones, some flags."""
    items = [st.tuples(st.just(name), value).map(list) for name, value in pairs]
    items += [st.just([f]) for f in flags]
    needed = [st.one_of(*[st.tuples(st.just(n), v).map(list)] * 6, st.just([])) for n, v in required]
    optional = st.lists(st.one_of(*items), max_size=3) if items else st.just([])
    return st.tuples(st.tuples(*needed) if needed else st.just(()), optional, st.randoms()).map(
        lambda t: _shuffled([*t[0], *t[1]], t[2]))


def _shuffled(groups: list[list[str]], rnd: Any) -> list[str]:
    rnd.shuffle(groups)
    return [tok for g in groups for tok in g]


def common() -> list[tuple[str, st.SearchStrategy[str]]]:
    return [("--dir", st.sampled_from(("runs", "./runs", "~/runs", *DIRS)))]


STORE = [("--store", st.sampled_from(("", "postgresql://u@h/db", "sqlite:x")))]


def seed_argv() -> st.SearchStrategy[list[str]]:
    ids = pick(IDS, ("r", "r", "s", "d", "new", "runs/r.json", "sub/n.json"))
    units = pick(UNITS, ("a", "b", "c", "new"))
    states = pick(STATES, STATES[:8])
    json_items = pick(JSONS, ('{"issue":"x"}', '[{"a":1},{"b":"\\u001b[2J"}]', '{"issue":"y","n":2}'))
    by_verb = {
        "init": st.tuples(ids, _opts([("--units", pick(UNITS, ("a,b", "a", "x,y,z"))),
                                      ("--id", pick(IDS, ("r", "new"))), ("--launch", pick(JSONS)),
                                      ("--required-phases", token()), *common()],
                                     ("--require-validation",),
                                     required=[("--task", pick(HOSTILE_TEXT, ("a task",)))])),
        "unit": st.tuples(ids, units, states, _opts([("--note", token()), ("--deps", pick(UNITS, ("a", "a,b"))),
                                                    *common()])),
        "phase": st.tuples(ids, pick(HOSTILE_TEXT, ("build", "test")),
                           pick(STATES, ("pending", "running", "done", "blocked", "skipped")), _opts(common())),
        "get": st.tuples(ids, _opts(common(), ("--summary",))),
        "resume": st.tuples(ids, _opts(common())),
        "item": st.tuples(ids, _opts(common(), required=[("--json", json_items)])),
        "resolve": st.tuples(ids, _opts([("--json", pick(JSONS)), *common()],
                                        required=[("--ids", pick(HOSTILE_TEXT, ("f-x,a", "f-1")))])),
        "validation": st.tuples(ids, pick(STATES, ("green", "red", "pass")), _opts([("--note", token()), *common()])),
        "finalize": st.tuples(ids, pick(STATES, ("done", "needs_attention", "aborted")),
                              _opts([("--result", token()), *common()])),
        "gc": st.tuples(st.sampled_from(("runs", "runs", *DIRS)), _opts([("--keep-days", st.sampled_from(NUMBERS))])),
        "store": st.tuples(st.sampled_from(("get", "unit", "gc")), ids, _opts(STORE)),
    }
    return st.one_of(*[strategy.map(_flatten(verb)) for verb, strategy in by_verb.items()])


def _flatten(verb: str) -> Callable[[tuple[Any, ...]], list[str]]:
    def flat(parts: tuple[Any, ...]) -> list[str]:
        head = [verb] if verb != "store" else []
        return [*head, *[t for p in parts for t in (p if isinstance(p, list) else [p])]]

    return flat


def reader_argv() -> st.SearchStrategy[list[str]]:
    run = pick(IDS)
    status = st.tuples(st.just("status"), st.lists(run, max_size=1), _opts(
        [("--units", pick(("failed", "done", "pending", "malformed", "bogus"))), *common()],
        ("--list", "--json", "--resume", "--no-color")))
    report = st.tuples(st.just("report"), st.lists(run, max_size=1), _opts(
        [("-o", st.sampled_from(("-", "out.html", "sub/out.html", "runs", "nodir/x.html", "/dev/full",
                                  "/dev/null", "job.toml", ""))), *common()]))
    log = st.tuples(st.just("log"), st.lists(run, max_size=1), _opts(
        [("--since", st.sampled_from(NUMBERS)), *common()], ("--json",)))
    return st.one_of(status, report, log).map(lambda p: [p[0], *p[1], *p[2]])


def run_argv() -> st.SearchStrategy[list[str]]:
    step_id = st.sampled_from(("a", "b", "a.b", "x" * 128, "x" * 129, "-a", "a b", "é", "", "a:b")) | token()
    good_id = st.sampled_from(("a", "b", "c"))
    step = st.tuples(good_id | good_id | step_id, st.sampled_from(HARMLESS)).map(lambda t: f"{t[0]}:{t[1]}")
    optional = [
        ("--state-dir", st.sampled_from(("runs", "runs", *DIRS))), ("-j", st.sampled_from(NUMBERS)),
        ("--timeout", st.sampled_from(DURATIONS)), ("--grace", st.sampled_from(DURATIONS)),
        ("--max-failures", st.sampled_from(NUMBERS)), ("--retry", st.sampled_from(("0", "1", "-1", "x", "9" * 30))),
        ("--backoff", st.sampled_from(SMALL_DURATIONS)), ("--explain", good_id | step_id),
        ("--logs-dir", st.sampled_from(("logs", "sub", "runs/r.json", ""))),
    ]
    flags = ("--dry-run", "--force", "--reset", "--status", "-q", "-v", "--keep-going")
    with_steps = [
        ("--step-timeout", st.tuples(good_id | step_id, st.sampled_from(DURATIONS)).map(":".join)),
        ("--step-artifact", st.tuples(good_id | step_id, st.sampled_from(("out", "sub", "", "a:b"))).map(":".join)),
        ("--step-log", st.tuples(good_id | step_id, st.sampled_from(("step.log", "sub/s.log", "runs", ""))).map(
            ":".join)),
    ]
    job_file = st.tuples(st.sampled_from(("job.toml", "job.toml", "failing.toml", "bad.toml", "huge.toml",
                                          "nosuch.toml", "runs", "sub", "runs/r.json")),
                         _opts(optional, flags)).map(lambda t: ["run", t[0], *t[1]])
    names = pick(("r", "d", "a/b", "..", "x" * 200), ("steps", "r", "new"))
    steps = st.tuples(names, st.lists(step, min_size=1, max_size=3), _opts([*optional, *with_steps], flags)).map(
        lambda t: ["run", "--job", t[0], *[a for s in t[1] for a in ("--step", s)], *t[2]])
    return st.one_of(job_file, steps, steps)


# Checkpoint values a writer must refuse, or take and read back: lone surrogates, NUL, times past
# the calendar once in UTC, nesting, wrong types.
PAYLOADS = ('{"branch_name": "b", "commit_sha": "a1b2c3d"}', '{"branch_name": "a\\ud800b", "commit_sha": "a1b2c3d"}',
            '{"branch_name": "\\u001b]0;t\\u0007\\u009b2J", "commit_sha": "a1b2c3d", "files_changed": ["\\u0000"]}',
            '{"branch_name": "b", "commit_sha": "A1B2C3D"}', '{"branch_name": "", "commit_sha": "a1b2c3d"}',
            '{"iteration_count": 2, "last_clean_sha": "b2c3d4e"}', '{"branch_name": 5}', "[]", "{", "null",
            '{"label_applied_at": "9999-12-31T23:59:59-23:59"}', '{"branch_name": "' + "x" * 600 + '"}',
            "[" * 300 + "]" * 300, '{"branch_name": "b", "commit_sha": "a1b2c3d", "extra": 1}')
ARTIFACTS = ("[]", '["job.toml"]', '["a\\u0000b"]', '["/etc/passwd"]', '["../x"]', '["\\udfff"]', "{}", '[1]')
STAMPS = ("2026-03-28T22:00:00Z", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+00:01", "2026-03-28T22:00:00",
          "yesterday", "")
COMMIT_MAPS = ("{}", '{"r": "a1b2c3d"}', '{"\\ud83d": "a1b2c3d"}', '{"r": "zz"}', "[]")


def checkpoint_argv() -> st.SearchStrategy[list[str]]:
    ticket = pick(("T", "T", "OMN-1", "a/b", "..", ".", "x" * 65, ""), ("T",))
    run = pick(("a1b2c3d4", "4fa2159f-9c61-5f8b-9ae5-28692b46cbd7", "other", ""), ("a1b2c3d4",))
    phase = pick(("implement", "local_review", "create_pr", "ready_for_merge", "deploy", ""),
                 ("implement", "local_review"))
    base = st.sampled_from(("ck", "ck", "./ck", "sub", "runs", "job.toml"))
    common = [("--base-dir", base)]
    head = [("--ticket-id", ticket), ("--run-id", run)]
    verbs = {
        "write": _opts([("--payload", st.sampled_from(PAYLOADS)), ("--artifact-paths", st.sampled_from(ARTIFACTS)),
                        ("--timestamp", st.sampled_from(STAMPS)), ("--repo-commit-map", st.sampled_from(COMMIT_MAPS)),
                        ("--attempt", st.sampled_from(("1", "2", "3", "0", "x", "9" * 30)))],
                       ("--strict",), required=[*head, ("--phase", phase), *common]),
        "read": _opts([], (), required=[*head, ("--phase", phase), *common]),
        "validate": _opts([("--root", st.sampled_from((".", "sub", "nosuch", "job.toml")))], (),
                          required=[*head, ("--phase", phase), *common]),
        "list": _opts([("--run-id", run)], (), required=[("--ticket-id", ticket), *common]),
        "resume-point": _opts([("--root", st.sampled_from((".", "sub", "nosuch")))], (), required=[*head, *common]),
        "show": st.tuples(ticket, _opts([("--run-id", run)], (), required=common)).map(lambda t: [t[0], *t[1]]),
    }
    return st.one_of(*[strategy.map(lambda a, verb=verb: ["checkpoint", verb, *a]) for verb, strategy in verbs.items()])


def argv() -> st.SearchStrategy[list[str]]:
    weird = st.lists(token(), min_size=1, max_size=4)  # unknown verbs, bare options, --help, ...
    return st.one_of(seed_argv(), seed_argv(), reader_argv(), run_argv(), checkpoint_argv(), weird,
                     st.sampled_from([["--help"], ["unit", "--help"], ["--version"], []]))


# Every defect the hardening issue listed that a call can show, always among the examples (random
# generation may or may not come upon them): each made a call hang, crash or write out of place.
REGRESSIONS: list[tuple[list[tuple[Any, ...]], list[list[str]]]] = [
    ([("fifo", "r.journal.jsonl")], [["get", "r"], ["unit", "r", "a", "done"], ["status", "r"], ["status", "--list"],
                                    ["gc", "runs"], ["resume", "r"]]),
    ([("fifo", "r.json")], [["get", "r"], ["status", "r", "--json"], ["status"], ["report", "r", "-o", "-"]]),
    ([("fifo", "r.lock")], [["unit", "r", "a", "done"], ["item", "r", "--json", "{}"]]),
    ([("lastbyte", "r.journal.jsonl", ord("x"))], [["get", "r"], ["unit", "r", "c", "done"]]),
    ([("remove", "r.json"), ("lastbyte", "r.journal.jsonl", ord("x"))], [["unit", "r", "c", "done"], ["get", "r"]]),
    ([], [["item", "r", "--json", '{"a":"\\ud800"}'], ["resolve", "r", "--json", '["\\udfff"]']]),
    ([], [["run", "huge.toml"], ["run", "--job", "t", "--step", "a:true", "--timeout", "9" * 400]]),
    ([("link", "job", False)], [["run", "job.toml"]]),
    ([("dir", "job")], [["run", "job.toml"]]),
    ([("link", "archive", False)], [["gc", "runs", "--keep-days", "0"], ["init", "d", "--task", "again"]]),
    ([("link", "r.lock", True)], [["unit", "r", "a", "done"]]),
    ([("link", "job.runner.lock", True)], [["run", "job.toml"]]),
    ([("doc", "x.json", b'{"id": "../../x", "task": "t", "status": "running", "units": {}}')], [["report", "x"]]),
    ([("chmod", "runs", True)], [["run", "job.toml"], ["unit", "r", "a", "done"]]),
    ([], [["status", "r"], ["status", "r", "--units", "failed"], ["log", "r"], ["run", "failing.toml"]]),
    ([], [["init", "x" * 300, "--task", "t"], ["get", "r", "--dir", "x" * 300], ["unit", "r", "u" * 300, "done"]]),
    ([], [["report", "r", "-o", "/dev/full"], ["report", "r", "-o", "nodir/x.html"], ["report", "r", "-o", "runs"]]),
    # a malformed document read as healthy; a unit depending on itself; checkpoints a
    # reader could not read back; one planted entry blocking a whole ticket; C1 printed raw.
    ([("doc", "r.json", b'{"schemaVersion": 2, "id": "r", "units": 5}'), ("remove", "r.journal.jsonl")],
     [["get", "r"], ["resume", "r"], ["status", "r", "--json"]]),
    ([], [["unit", "r", "a", "pending", "--deps", "a"], ["get", "r"], ["status", "r", "--json"]]),
    ([], [["checkpoint", "write", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4", "--phase",
           "implement", "--payload", PAYLOADS[1], "--strict"],
          ["checkpoint", "write", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4", "--phase",
           "implement", "--payload", PAYLOADS[0], "--timestamp", STAMPS[1], "--strict"],
          ["checkpoint", "write", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4", "--phase",
           "implement", "--payload", PAYLOADS[0], "--artifact-paths", ARTIFACTS[2], "--strict"],
          ["checkpoint", "validate", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4", "--phase",
           "implement", "--root", "."]]),
    ([("ledger", LEDGER_TARGETS[0], "fifo"), ("ledger", LEDGER_TARGETS[4], "dir")],
     [["checkpoint", "read", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4", "--phase", "implement"],
      ["checkpoint", "list", "--base-dir", "ck", "--ticket-id", "T"], ["checkpoint", "show", "T", "--base-dir", "ck"],
      ["checkpoint", "resume-point", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4"],
      ["checkpoint", "write", "--base-dir", "ck", "--ticket-id", "T", "--run-id", "a1b2c3d4", "--phase",
       "implement", "--payload", PAYLOADS[0], "--strict"]]),
]
