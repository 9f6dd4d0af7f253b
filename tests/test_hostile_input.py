"""Inputs that used to lose a write, crash or reach a terminal raw (issue: hardening, items 9-12).

- a flipped final newline, a final record with a bad checksum: corruption (one line, nothing
  rewritten), never a torn tail to cut off, when a snapshot or a writer acknowledged it;
- durations that overflow, names over 255 bytes, lone surrogates, ``RESUMABLE_DIR='~/x'``: one-line
  errors (or one rule), never "internal error";
- control characters from data never reach a terminal raw; the report template is filled once;
- ``status RUN --json`` on an unreadable run says why on stderr too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import resumable
from corehelpers import tree
from reliability.inproc import Called, call, clean_env
from resumable.errors import CorruptRunError


def one_line(r: Called, code: int, *fragments: str) -> str:
    assert r.code == code, (r.code, r.out, r.err)
    lines = r.err_lines
    assert len(lines) == 1 and lines[0].startswith("resumable: "), r.err
    assert "internal error" not in r.err and "Traceback" not in r.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


def seed(runs: Path, *args: str) -> Called:
    return call([*args, "--dir", str(runs)])


# --- 9. the torn-tail rule stops at what was acknowledged ------------------------------------------


def _three_writes(runs: Path) -> Path:
    assert seed(runs, "init", "r", "--task", "t", "--units", "a,b,c").code == 0
    assert seed(runs, "unit", "r", "a", "done").code == 0
    assert seed(runs, "unit", "r", "b", "done").code == 0
    return runs / "r.journal.jsonl"


def _damage(path: Path, *, newline: bool = False, checksum: bool = False) -> None:
    data = bytearray(path.read_bytes())
    if newline:
        data[-1] = ord("x")
    if checksum:
        data[-5] ^= 0x01  # a hex digit of the last record's crc
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [{"newline": True}, {"checksum": True}])
@pytest.mark.parametrize("view", ["exact", "none"])
def test_a_damaged_acknowledged_last_record_is_corruption(runs: Path, damage: dict[str, bool], view: str) -> None:
    """"b done" was acknowledged: with the snapshot its marker proves it; without one, a whole
    record followed by a wrong byte is damage (a torn write leaves a prefix). Either way: one line,
    exit 1, nothing rewritten, and no later write lands after it."""
    journal = _three_writes(runs)
    if view == "none":
        (runs / "r.json").unlink()
    _damage(journal, **damage)
    before = tree(runs)
    for args in (("get", "r"), ("unit", "r", "c", "done"), ("resume", "r"), ("status", "r")):
        one_line(call([*args, "--dir", str(runs)]), 1, "r.journal.jsonl")
        assert tree(runs) == before, args


def test_a_torn_last_write_is_still_cut_off(runs: Path) -> None:
    """The control: a prefix of a record (its fsync never returned) is a write in flight."""
    journal = _three_writes(runs)
    (runs / "r.json").unlink()  # the exact view would acknowledge the record
    data = journal.read_bytes()
    journal.write_bytes(data[:-20])
    doc = json.loads(seed(runs, "get", "r").out)
    assert doc["units"]["b"]["status"] == "pending"
    assert seed(runs, "unit", "r", "c", "done").code == 0
    assert journal.read_bytes().count(b"\n") == 3  # init, a done, c done


def test_a_writer_never_appends_after_a_damaged_record(runs: Path) -> None:
    """A long-lived writer (the runner, an API user) that acknowledged "b done" itself."""
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a", "b", "c"])
    run.unit("b", "done")
    journal = runs / "r.journal.jsonl"
    _damage(journal, newline=True)
    before = journal.read_bytes()
    with pytest.raises(CorruptRunError, match="nothing was changed"):
        run.unit("c", "done")
    assert journal.read_bytes() == before

    # Another writer, whose own acknowledged record is then cut off while no view shows it.
    (runs / "r.json").unlink()
    journal.write_bytes(before[:-1] + b"\n")  # repaired
    other = resumable.open_run("r", runs_dir=runs)
    other.unit("a", "done")
    (runs / "r.json").unlink()
    acknowledged = journal.read_bytes()
    with open(journal, "r+b") as f:  # the same file, cut back (not replaced)
        f.truncate(len(acknowledged) - 30)
    cut = journal.read_bytes()
    with pytest.raises(CorruptRunError, match="already acknowledged"):
        other.unit("c", "done")
    assert journal.read_bytes() == cut


# --- 10. overflowing, oversized and invalid values: one line each ---------------------------------

HUGE = "9" * 400


@pytest.mark.parametrize("value", [HUGE, f'"{HUGE}s"', "1e400", f'"{HUGE}.5h"'])
def test_a_duration_that_overflows_in_a_job_file(tmp_path: Path, value: str) -> None:
    (tmp_path / "resumable.toml").write_text(f'[job]\nname = "j"\ntimeout = {value}\n[steps.a]\nrun = "true"\n')
    one_line(call(["run"], cwd=str(tmp_path)), 1, "resumable.toml", "timeout")
    assert not (tmp_path / ".resumable").exists()


@pytest.mark.parametrize("flag", ["--timeout", "--grace", "--backoff"])
def test_a_duration_that_overflows_on_the_command_line(tmp_path: Path, flag: str) -> None:
    r = call(["run", "--job", "j", "--step", "a:true", "--dir", str(tmp_path / "runs"), flag, HUGE])
    one_line(r, 1, flag)
    r = call(["run", "--job", "j", "--step", "a:true", "--dir", str(tmp_path / "runs"), "--step-timeout", f"a:{HUGE}"])
    one_line(r, 1, "--step-timeout")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("days", [HUGE, "inf", "1e400", "nan", "-1"])
def test_gc_keep_days_out_of_range(runs: Path, days: str) -> None:
    one_line(call(["gc", str(runs), "--keep-days", days]), 1, "--keep-days")


def test_names_longer_than_a_file_name_may_be(runs: Path, tmp_path: Path) -> None:
    long = "x" * 300
    one_line(call(["get", "r", "--dir", str(tmp_path / long)]), 1, "--dir", "255")
    one_line(call(["get", "r"], env=clean_env(RESUMABLE_DIR=str(tmp_path / long))), 1, "RESUMABLE_DIR")
    one_line(call(["status", "--dir", str(tmp_path / long)]), 1, "255")
    one_line(seed(runs, "init", long, "--task", "t"), 1, "invalid run id")
    one_line(seed(runs, "get", str(tmp_path / f"{long}.json")), 1)
    one_line(seed(runs, "init", str(tmp_path / f"{'y' * 250}.json"), "--task", "t"), 1, "too long")
    assert seed(runs, "init", "r", "--task", "t").code == 0
    one_line(seed(runs, "unit", "r", "u" * 300, "done"), 1, "limit is 256")
    one_line(call(["run", "--job", "j", "--step", f"{'s' * 200}:true", "--dir", str(runs)]), 1, "bad step id")
    assert sorted(p.name for p in runs.iterdir()) == ["r.journal.jsonl", "r.json", "r.lock"]


@pytest.mark.parametrize("args", [
    ["item", "r", "--json", '{"a":"\\ud800"}'],
    ["item", "r", "--json", '[{"\\udfff": 1}]'],
    ["resolve", "r", "--json", '["\\ud83d"]'],
    ["init", "s", "--task", "t", "--launch", '{"scriptPath": "x\\udc00"}'],
])
def test_lone_surrogates_are_refused_in_one_line(runs: Path, args: list[str]) -> None:
    assert seed(runs, "init", "r", "--task", "t").code == 0
    before = tree(runs)
    one_line(seed(runs, *args), 1, "lone surrogate")
    assert tree(runs) == before


def test_one_rule_for_tilde(tmp_path: Path) -> None:
    """Writers and readers expand ``~`` the same way (no `./~/x` beside a `$HOME/x`)."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(HOME=str(home), RESUMABLE_DIR="~/x")
    assert call(["init", "r", "--task", "t"], env=env, cwd=str(work)).code == 0
    assert (home / "x" / "r.json").exists() and not (work / "~").exists()
    r = call(["get", "r", "--summary"], env=env, cwd=str(work))
    assert r.code == 0 and json.loads(r.out)["id"] == "r"
    r = call(["status", "--list", "--json"], env=env, cwd=str(work))
    assert r.code == 0 and [d["id"] for d in json.loads(r.out)] == ["r"]
    assert call(["get", "r", "--dir", "~/x"], env=env, cwd=str(work)).code == 0


# --- 11. terminal injection -------------------------------------------------------------------------

HOSTILE = "a\x1b]0;pwned\x07b\x1b[2Jc\rd\ne\x9b31mf\x00g"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _raw_controls(text: str) -> list[str]:
    """Control characters other than the newline that ends each line."""
    return RAW.findall(text)


def _hostile_run(runs: Path) -> None:
    run = resumable.open_run("evil\x1bid".replace("\x1b", "-"), runs_dir=runs)
    run.init(HOSTILE, units=["u\x1b[31m", "v"], required_phases=["p\x07"])
    run.unit("u\x1b[31m", "failed", note=HOSTILE)
    run.unit("v", "blocked", note="\x9b2J" + HOSTILE)
    run.phase("p\x07\x1b[H", "running")
    run.item({"issue": HOSTILE, "severity": "high\x1b"})
    run.validation("red", note=HOSTILE)
    run.finalize("needs_attention", result=HOSTILE)


@pytest.mark.parametrize("args", [
    ["status", "evil-id"], ["status", "--list"], ["status", "evil-id", "--units", "failed"],
    ["status", "evil-id", "--units", "blocked"], ["status", "evil-id", "--resume"], ["log", "evil-id"],
])
def test_status_never_prints_raw_control_characters(runs: Path, args: list[str]) -> None:
    _hostile_run(runs)
    r = call([*args, "--dir", str(runs)])
    assert r.code == 0, r.err
    text = r.out.decode()
    assert not _raw_controls(text), (args, _raw_controls(text))
    assert "\\x1b" in text or args[-1] == "blocked" or "--resume" in args


def test_error_lines_escape_what_they_quote(runs: Path) -> None:
    assert seed(runs, "init", "r", "--task", "t").code == 0
    for args in (["unit", "r", "bad\x1b[2J id", "done"], ["unit", "r", "u", f"state{HOSTILE}"],
                 ["phase", "r", "p", f"x{HOSTILE}"], ["get", "no\x1b]0;t\x07such"], ["status", f"x\x1b[2J{HOSTILE}"],
                 [f"verb\x1b[2J{HOSTILE}"], ["run", f"job\x1b[2J{HOSTILE}.toml"]):
        r = call([*args, "--dir", str(runs)])
        assert r.code != 0
        assert len(r.err_lines) == 1 and not _raw_controls(r.err), (args, r.err)


def test_the_runner_escapes_log_tails_and_notes(tmp_path: Path) -> None:
    printf = "printf '\\\\033]0;pwned\\\\007\\\\033[2J\\\\r\\\\302\\\\233J\\\\n'; exit 1"
    (tmp_path / "resumable.toml").write_text(f'[job]\nname = "j"\n[steps.a]\nrun = "{printf}"\n')
    r = call(["run"], cwd=str(tmp_path))
    assert r.code == 1
    text = r.out.decode() + r.err
    assert "pwned" in text and not _raw_controls(text), _raw_controls(text)


def test_a_task_holding_the_template_placeholder_is_not_expanded(runs: Path, tmp_path: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs)
    run.init("before {{DATA}} {{TITLE}} after </script><script>alert(1)</script>", units=["a"])
    r = seed(runs, "report", "r", "-o", "-")
    assert r.code == 0, r.err
    page = r.out.decode()
    plain = resumable.open_run("r", runs_dir=runs)
    assert page.count("<script") == resumable.open_run("r", runs_dir=runs).report_html().count("<script")
    assert "</script><script>alert(1)" not in page
    assert page.count("{{DATA}}") == 1  # the task's own text, shown once, not replaced
    assert plain.report_html().count("{{TITLE}}") == 1


# --- 12. an unreadable run with --json ----------------------------------------------------------------


def test_status_json_of_an_unreadable_run_says_why_on_stderr(runs: Path) -> None:
    (runs / "bad.json").write_text("{ not json")
    r = call(["status", "bad", "--json", "--dir", str(runs)])
    assert r.code == 1
    doc = json.loads(r.out)
    assert doc["file"].endswith("bad.json") and "cannot read/parse" in doc["error"]
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("resumable: cannot read/parse")
    r = call(["status", "bad", "--resume", "--json", "--dir", str(runs)])
    assert r.code == 1 and json.loads(r.out)["kind"] == "unreadable" and len(r.err_lines) == 1

