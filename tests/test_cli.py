"""The CLI through the real `resumable` console script: every verb and refusal, exit codes, stdout,
and the one-line stderr; plus help, version, docs coverage and `python -m resumable`."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corehelpers import RESUMABLE, assert_error, cli, ok, records, snapshot_file, tree
from resumable.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
# Every command `resumable --help` lists, in its order (test_the_command_list_is_the_clis keeps it so).
COMMANDS = ["run", "status", "report", "log", "rerun", "reconcile", "doctor", "completion",
            "init", "unit", "phase", "get", "resume", "item", "resolve", "validation", "finalize", "gc",
            "checkpoint", "guard", "submit", "worker", "db", "export", "import", "mcp", "skills"]


def _subcommands() -> list[tuple[str, str]]:
    """(group, subcommand) for every command that is a group of commands (checkpoint, guard, db)."""
    import click

    from resumable.cli.main import LAZY_COMMANDS

    out = []
    for name, (module, attr, _) in LAZY_COMMANDS.items():
        command = getattr(importlib.import_module(module), attr)
        if isinstance(command, click.Group):
            out += [(name, sub) for sub in command.list_commands(click.Context(command))]
    return out


SUBCOMMANDS = _subcommands()
USAGE_RE = "usage: resumable <init|unit|phase|get|resume|item|resolve|validation|finalize|gc>"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def r(runs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, runs=runs)


def init(runs: Path, run_id: str = "r", units: str = "a,b", *extra: str) -> None:
    assert ok(r(runs, "init", run_id, "--task", "the task", "--units", units, *extra)) == f"{run_id}\n"


# --- front door ------------------------------------------------------------------------------


def test_help_lists_every_command(tmp_path: Path) -> None:
    out = ok(cli("--help", cwd=tmp_path))
    assert "Usage: resumable" in out
    for cmd in COMMANDS:
        assert re.search(rf"^\s+{cmd}\b", out, re.M), cmd
    assert ok(cli("-h", cwd=tmp_path)) == out
    # Grouped: the main commands first, then the low-level verbs, the ledger and guard, the stores.
    listed = [m.group(1) for m in re.finditer(r"^  (\w+)\s", out, re.M) if m.group(1) in COMMANDS]
    assert listed == COMMANDS, listed
    titles = [line for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert titles[-5:] == ["Commands:", "Low-level verbs (one write to a run each, for scripts and agents):",
                           "The phase ledger and the recurring-run guard:", "Workers and stores:",
                           "For coding agents:"], titles


def test_the_command_list_is_the_clis() -> None:
    """A command added to the CLI without being added here would go untested for help and docs."""
    from resumable.cli.main import LAZY_COMMANDS, SECTIONS, VERBS

    assert sorted([*VERBS, *LAZY_COMMANDS]) == sorted(COMMANDS)
    assert [name for _, names in SECTIONS for name in names] == COMMANDS
    assert {group for group, _ in SUBCOMMANDS} == {"checkpoint", "guard", "db", "skills"}


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(cmd: str, tmp_path: Path) -> None:
    out = ok(cli(cmd, "--help", cwd=tmp_path))  # exit 0, nothing on stderr (no traceback)
    assert out.startswith(f"Usage: resumable {cmd}")
    assert len(out.splitlines()) >= 3
    assert ok(cli(cmd, "-h", cwd=tmp_path)) == out
    assert not list(tmp_path.iterdir())  # help creates nothing


@pytest.mark.parametrize(("group", "sub"), SUBCOMMANDS, ids=[f"{g}-{s}" for g, s in SUBCOMMANDS])
def test_every_subcommand_has_help(group: str, sub: str, tmp_path: Path) -> None:
    out = ok(cli(group, sub, "--help", cwd=tmp_path))
    assert out.startswith(f"Usage: resumable {group} {sub}")
    assert len(out.splitlines()) >= 3
    assert not list(tmp_path.iterdir())


def guide_pages() -> str:
    """Every page of the docs site written by hand: the generated reference (docs/reference/cli.md
    names every command in its mkdocs-click directives) does not count as showing a command."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts)
    assert len(pages) >= 10, pages
    return "\n".join(p.read_text() for p in pages)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_appears_in_the_docs(cmd: str) -> None:
    assert f"resumable {cmd}" in guide_pages(), f"no page in docs/ shows `resumable {cmd}`"


def test_the_docs_have_the_exit_code_table() -> None:
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text()
    for code in ("0", "1", "2", "3", "130"):
        assert re.search(rf"^\|\s*{code}\s*\|", page, re.M), code


def test_version(tmp_path: Path) -> None:
    import resumable

    assert ok(cli("--version", cwd=tmp_path)) == f"resumable, version {resumable.__version__}\n"


def test_python_dash_m(tmp_path: Path, runs: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "resumable", "--version"], capture_output=True, text=True,
                          cwd=tmp_path, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("resumable, version ")
    env = {"RESUMABLE_DIR": str(runs), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "resumable", "init", "m", "--task", "t"], capture_output=True,
                          text=True, cwd=tmp_path, env=env, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "m\n", "")


def test_no_arguments_is_a_usage_error(tmp_path: Path) -> None:
    proc = cli(cwd=tmp_path)
    # The seed: missing <cmd> -> usage, exit 1 (2 means "refused" in our table).
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "sage" in proc.stderr + proc.stdout


def test_unknown_command(tmp_path: Path) -> None:
    assert_error(cli("frobnicate", cwd=tmp_path), 1, "unknown command 'frobnicate'")


@pytest.mark.parametrize("verb", ["init", "unit", "phase", "get", "resume", "item", "resolve", "validation",
                                  "finalize"])
def test_missing_run_argument_is_usage(verb: str, runs: Path) -> None:
    assert_error(r(runs, verb), 1, USAGE_RE)


# --- init ------------------------------------------------------------------------------------------


def test_init_and_default_id(runs: Path, tmp_path: Path) -> None:
    init(runs)
    doc = json.loads(ok(r(runs, "get", "r")))
    assert doc["task"] == "the task" and list(doc["units"]) == ["a", "b"] and doc["status"] == "running"
    # A .json path is used as given; without --id the seed's default id.
    out = ok(cli("init", "sub/x.json", "--task", "t", cwd=tmp_path))
    assert re.fullmatch(r"run-\d{4}-\d{2}-\d{2}-\d{6}Z\n", out)
    assert json.loads((tmp_path / "sub" / "x.json").read_text())["id"] == out.strip()
    assert ok(cli("init", "y.json", "--task", "t", "--id", "custom", cwd=tmp_path)) == "custom\n"


def test_a_runs_directory_init_creates_keeps_git_status_clean(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and no git")
        pytest.skip("no git")
    project = tmp_path / "project"
    project.mkdir()
    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull, "HOME": str(tmp_path)}
    subprocess.run([git, "init", "-q"], cwd=project, check=True, env={**os.environ, **env})
    assert ok(cli("init", "r", "--task", "t", cwd=project)) == "r\n"
    runs = project / ".resumable" / "runs"
    assert (runs / ".gitignore").read_text().splitlines()[-1] == "*"  # as pytest's cache does
    status = subprocess.run([git, "status", "--porcelain", "--untracked-files=all"], cwd=project, check=True,
                            capture_output=True, text=True, env={**os.environ, **env}).stdout
    assert status == ""
    assert "r" in ok(cli("status", "--list", cwd=project))  # not taken for a run
    # A runs directory that already exists is the user's: nothing is added to it.
    own = tmp_path / "own"
    own.mkdir()
    ok(cli("init", "r", "--task", "t", "--dir", str(own)))
    assert not (own / ".gitignore").exists()


def test_init_options(runs: Path) -> None:
    launch = '{"scriptPath": "/p/pipeline.mjs", "args": {"run": "r"}}'
    init(runs, "r", " a , ,b,", "--required-phases", "p,q", "--require-validation", "--launch", launch)
    doc = json.loads(ok(r(runs, "get", "r")))
    assert list(doc["units"]) == ["a", "b"] and doc["requiredPhases"] == ["p", "q"]
    assert doc["requireValidation"] is True and doc["launch"] == json.loads(launch)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], 'init requires --task "<desc>"'),
        (["--task", "  "], "init requires a task description"),
        (["--task"], "option --task is missing its value"),
        (["--task", "--units", "a"], "option --task is missing its value"),
        (["--task", "t", "--launch", "{bad"], "--launch is not valid JSON: "),
        (["--task", "t", "--launch", "[1]"], "--launch must be a JSON object { scriptPath, args } — got an array"),
        (["--task", "t", "--launch", "null"], "got null"),
        (["--task", "t", "--launch", '"s"'], "--launch must be a JSON object"),
        (["--task", "t", "--launch", "{}"], "--launch.scriptPath must be a non-empty string"),
        (["--task", "t", "--launch", '{"scriptPath": " "}'], "--launch.scriptPath must be a non-empty string"),
        (["--task", "t", "--launch", '{"scriptPath": "p", "args": [1]}'],
         "--launch.args must be a JSON object when present"),
        (["--task", "t", "--units", "a b"], "unit id 'a b' contains commas/whitespace"),
        (["--task", "t", "--units", "x" * 257], "the limit is 256"),
        (["--task", "t", "--bogus"], "unknown option --bogus"),
        (["--task", "t", "--id", "other"], "does not match"),
    ],
)
def test_init_errors_touch_nothing(runs: Path, args: list[str], message: str) -> None:
    line = assert_error(r(runs, "init", "r", *args), 1, message)
    assert line.count("--launch is") <= 1
    assert not runs.exists() or not any(runs.iterdir())


def test_init_over_live_refused_over_finished_archived(runs: Path) -> None:
    init(runs)
    before = tree(runs)
    assert_error(r(runs, "init", "r", "--task", "again"), 2, "is a LIVE checkpoint (status=running)")
    assert tree(runs) == before
    ok(r(runs, "finalize", "r", "needs_attention"))
    assert_error(r(runs, "init", "r", "--task", "again"), 2, "status=needs_attention")
    ok(r(runs, "finalize", "r", "aborted"))
    init(runs, "r", "z")
    assert list(json.loads(ok(r(runs, "get", "r")))["units"]) == ["z"]
    assert len(list((runs / "archive").iterdir())) == 2


# --- ids ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["..", "../x", "a/b", "/etc/passwd", "x" * 200, ".hidden", "-x", "a b", "a..b",
                                    "é"])
@pytest.mark.parametrize("verb", ["init", "unit", "get", "resume"])
def test_bad_run_ids(runs: Path, tmp_path: Path, run_id: str, verb: str) -> None:
    extra = {"init": ["--task", "t"], "unit": ["a", "done"], "get": [], "resume": []}[verb]
    assert_error(cli(verb, run_id, *extra, runs=runs, cwd=tmp_path), 1, "invalid run id")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("unit_id", ["a b", "a,b", "a\tb", " ", "x" * 257])
def test_bad_unit_ids(runs: Path, unit_id: str) -> None:
    init(runs)
    before = tree(runs)
    proc = r(runs, "unit", "r", unit_id, "done")
    assert_error(proc, 1)
    assert tree(runs) == before


def test_bad_dep_ids(runs: Path) -> None:
    init(runs)
    assert_error(r(runs, "unit", "r", "a", "pending", "--deps", "x y,z"), 1, "'x y' contains commas/whitespace")


# --- unit / phase --------------------------------------------------------------------------------


def test_unit_transitions_and_refusals(runs: Path) -> None:
    init(runs, "r", "a,b,c")
    assert ok(r(runs, "unit", "r", "a", "in_progress", "--note", "working")) == ""
    assert ok(r(runs, "unit", "r", "b", "pending", "--deps", "a")) == ""
    assert ok(r(runs, "unit", "r", "c", "pending", "--deps", "b, q")) == ""
    ok(r(runs, "unit", "r", "new", "blocked"))
    doc = json.loads(ok(r(runs, "get", "r")))
    assert doc["units"]["a"]["note"] == "working" and doc["units"]["a"]["startedAt"]
    assert doc["units"]["c"]["dependsOn"] == ["b", "q"] and doc["units"]["new"]["status"] == "blocked"
    ok(r(runs, "unit", "r", "a", "done"))
    ok(r(runs, "unit", "r", "a", "done"))  # done -> done is fine
    for state in ("pending", "in_progress", "blocked", "dep_blocked", "failed"):
        assert_error(r(runs, "unit", "r", "a", state), 2,
                     "unit 'a' is already done — refusing to demote it (resume must skip done units)")
    assert json.loads(ok(r(runs, "get", "r")))["units"]["a"]["status"] == "done"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a"], "unit requires <unit-id> <pending|in_progress|done|blocked|dep_blocked"),
        (["a", "finished"], "unknown unit state 'finished'; the states are pending, in_progress, done,"
                            " blocked, dep_blocked, failed, timeout, interrupted"),
        (["a", "done", "--note"], "option --note is missing its value"),
        (["a", "done", "--note", "--deps", "x"], "option --note is missing its value"),
        (["a", "done", "--deps"], "option --deps is missing its value"),
        (["a", "done", "--bogus", "1"], "unknown option --bogus"),
    ],
)
def test_unit_usage_errors(runs: Path, args: list[str], message: str) -> None:
    init(runs)
    assert_error(r(runs, "unit", "r", *args), 1, message)


def test_unit_on_missing_runs(runs: Path, tmp_path: Path) -> None:
    init(runs)
    assert_error(r(runs, "unit", "nope", "a", "done"), 3, "no such run")
    assert_error(r(runs, "get", "nope"), 3, "no such run")
    assert_error(r(runs, "resume", "nope"), 3)
    assert_error(cli("unit", "nope.json", "a", "done", cwd=tmp_path), 1, "nope.json")
    assert_error(cli("get", str(tmp_path / "no" / "dir.json"), cwd=tmp_path), 1)
    assert not (tmp_path / "no").exists()


def test_phase(runs: Path) -> None:
    init(runs)
    assert ok(r(runs, "phase", "r", "build", "running")) == ""
    ok(r(runs, "phase", "r", "build", "done"))
    doc = json.loads(ok(r(runs, "get", "r")))
    assert doc["currentPhase"] == "build" and doc["phases"]["build"]["status"] == "done"
    assert_error(r(runs, "phase", "r", "build", "finished"), 1,
                 "unknown phase state 'finished'; the states are pending, running, done, blocked, skipped")
    assert_error(r(runs, "phase", "r", "build"), 1, "phase requires")


# --- get / resume ------------------------------------------------------------------------------


def test_get_and_summary(runs: Path) -> None:
    init(runs, "r", "a,b,c")
    ok(r(runs, "unit", "r", "a", "done"))
    ok(r(runs, "unit", "r", "b", "in_progress"))
    out = ok(r(runs, "get", "r"))
    assert out.startswith('{\n  "schemaVersion": 2,') and "_journal" not in out
    summary = json.loads(ok(r(runs, "get", "r", "--summary")))
    assert summary == {"id": "r", "status": "running", "task": "the task", "currentPhase": None, "total": 3,
                       "done": 1, "blocked": [], "dep_blocked": [], "in_progress": ["b"],
                       "updatedAt": summary["updatedAt"]}


def test_resume_reports_chains_unknown_deps_and_cycles(runs: Path) -> None:
    init(runs, "r", "a,b,c,d,e,f")
    for args in (["b", "--deps", "a"], ["c", "--deps", "b"], ["d", "--deps", "q"], ["e", "--deps", "f"],
                 ["f", "--deps", "e"]):
        ok(r(runs, "unit", "r", args[0], "pending", *args[1:]))
    ok(r(runs, "unit", "r", "a", "done"))
    before = tree(runs)
    out = json.loads(ok(r(runs, "resume", "r")))
    assert out == {"skip": ["a"], "eligible": ["b"], "dep_blocked": {"c": "b", "d": "q", "e": "f", "f": "e"},
                   "unknown_deps": {"d": ["q"]}, "cycles": [["e", "f"]]}
    assert tree(runs) == before  # read-only


def test_null_and_malformed_units_never_crash_a_verb(runs: Path) -> None:
    runs.mkdir()
    doc = {"schemaVersion": 2, "id": "h", "task": "t", "status": "running", "createdAt": "x", "updatedAt": "x",
           "phases": None, "units": {"a": None, "b": "junk", "c": {"status": "done"}, "d": {"dependsOn": "c"}},
           "openItems": None, "result": None}
    (runs / "h.json").write_text(json.dumps(doc, indent=2))
    ok(r(runs, "get", "h"))
    assert json.loads(ok(r(runs, "get", "h", "--summary")))["total"] == 4
    assert json.loads(ok(r(runs, "resume", "h")))["malformed"] == ["a", "b", "d"]
    assert_error(r(runs, "finalize", "h", "done"), 2, "3 unit(s) not done: a, b, d")
    assert ok(r(runs, "item", "h", "--json", '{"a": 1}')) == '["f-9f89c740ceb4"]\n'
    assert ok(r(runs, "resolve", "h", "--ids", "f-9f89c740ceb4")) == '["f-9f89c740ceb4"]\n'
    ok(r(runs, "phase", "h", "p", "running"))
    ok(r(runs, "validation", "h", "green"))
    ok(r(runs, "unit", "h", "a", "done"))
    ok(r(runs, "unit", "h", "d", "done"))
    assert json.loads(ok(r(runs, "get", "h")))["units"]["a"]["status"] == "done"


def test_unreadable_files_are_one_line_errors(runs: Path) -> None:
    runs.mkdir()
    (runs / "bad.json").write_text("{ not json")
    for args in (["get", "bad"], ["resume", "bad"], ["unit", "bad", "a", "done"], ["init", "bad", "--task", "t"]):
        assert_error(r(runs, *args), 1, "cannot read/parse", "bad.json")
    assert (runs / "bad.json").read_text() == "{ not json"
    (runs / "arr.json").write_text("[1, 2]")
    assert_error(r(runs, "get", "arr"), 1, "arr.json")


def test_corrupt_journal_is_a_one_line_error_with_offset(runs: Path) -> None:
    init(runs)
    ok(r(runs, "unit", "r", "a", "done"))
    ok(r(runs, "unit", "r", "b", "done"))
    (runs / "r.json").unlink()  # force a replay from the journal's start
    data = bytearray((runs / "r.journal.jsonl").read_bytes())
    second = data.index(b"\n") + 1
    data[second + 15] ^= 0x01
    (runs / "r.journal.jsonl").write_bytes(bytes(data))
    before = tree(runs)
    for args in (["get", "r"], ["resume", "r"], ["unit", "r", "c", "done"]):
        assert_error(r(runs, *args), 1, "r.journal.jsonl", f"byte offset {second}")
    assert tree(runs) == before


# --- item / resolve / validation / finalize ------------------------------------------------------


def test_item_and_resolve(runs: Path) -> None:
    init(runs)
    assert ok(r(runs, "item", "r", "--json", '{"a":1}')) == '["f-9f89c740ceb4"]\n'
    out = ok(r(runs, "item", "r", "--json", '[{"phase":"test","issue":"gap"}, {"id":"mine"}, "note", 3]'))
    assert json.loads(out) == ["f-9e559be5907f", "mine"]
    assert ok(r(runs, "item", "r", "--json", '"just text"')) == ""  # no ids: prints nothing
    assert ok(r(runs, "resolve", "r", "--ids", "mine, nope,")) == '["mine"]\n'
    assert ok(r(runs, "resolve", "r", "--json", '["f-9f89c740ceb4"]')) == '["f-9f89c740ceb4"]\n'
    assert ok(r(runs, "resolve", "r", "--json", '"f-9e559be5907f"')) == '["f-9e559be5907f"]\n'
    assert ok(r(runs, "resolve", "r", "--ids", "mine")) == "[]\n"
    doc = json.loads(ok(r(runs, "get", "r")))
    assert doc["openItems"] == ["just text"] or doc["openItems"] == ["note", 3, "just text"]
    assert [i["id"] for i in doc["resolvedItems"]] == ["mine", "f-9f89c740ceb4", "f-9e559be5907f"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["item", "r"], "item requires --json '<object-or-array>'"),
        (["item", "r", "--json", "{x"], "item --json is not valid JSON"),
        (["item", "r", "--json"], "option --json is missing its value"),
        (["resolve", "r"], "resolve requires --ids"),
        (["resolve", "r", "--json", "[x"], "resolve --json is not valid JSON"),
        (["validation", "r"], "validation requires <green|red> (aliases: pass/ok/fail)"),
        (["validation", "r", "maybe"], "validation requires <green|red>"),
        (["finalize", "r"], "finalize requires <done|needs_attention|aborted>"),
        (["finalize", "r", "finished"], "finalize requires <done|needs_attention|aborted>"),
    ],
)
def test_verb_usage_errors(runs: Path, args: list[str], message: str) -> None:
    init(runs)
    before = tree(runs)
    assert_error(r(runs, *args), 1, message)
    assert tree(runs) == before


@pytest.mark.parametrize(("alias", "status"), [("green", "green"), ("pass", "green"), ("ok", "green"),
                                               ("red", "red"), ("fail", "red")])
def test_validation_aliases(runs: Path, alias: str, status: str) -> None:
    init(runs)
    assert ok(r(runs, "validation", "r", alias, "--note", "ci #4")) == ""
    fv = json.loads(ok(r(runs, "get", "r")))["finalValidation"]
    assert fv["status"] == status and fv["note"] == "ci #4"


def test_finalize_done_is_fail_closed(runs: Path) -> None:
    init(runs, "r", "a,b", "--required-phases", "ship", "--require-validation")
    ok(r(runs, "phase", "r", "lint", "blocked"))
    ok(r(runs, "item", "r", "--json", '{"a":1}'))
    before = tree(runs)
    line = assert_error(r(runs, "finalize", "r", "done"), 2)
    assert line == ("resumable: refusing finalize done — 2 unit(s) not done: a, b; 1 phase(s) blocked: lint; "
                    "1 required phase(s) not done: ship; 1 open finding(s) in openItems; "
                    "final validation is absent (use needs_attention)")
    assert tree(runs) == before
    steps: list[tuple[list[str], str | None]] = [
        (["unit", "r", "a", "done"], "1 unit(s) not done: b"),
        (["unit", "r", "b", "done"], "1 phase(s) blocked: lint"),
        (["phase", "r", "lint", "done"], "1 required phase(s) not done: ship"),
        (["phase", "r", "ship", "done"], "1 open finding(s) in openItems"),
        (["resolve", "r", "--ids", "f-9f89c740ceb4"], "final validation is absent"),
        (["validation", "r", "red"], "final validation is red (not green)"),
        (["validation", "r", "green"], None),
    ]
    for args, reason in steps:
        r(runs, *args)
        if reason is not None:
            assert reason in assert_error(r(runs, "finalize", "r", "done"), 2)
    assert ok(r(runs, "finalize", "r", "done", "--result", "all green")) == ""
    doc = json.loads(ok(r(runs, "get", "r")))
    assert doc["status"] == "done" and doc["result"] == "all green" and doc["finishedAt"]


def test_finalize_needs_attention_and_aborted_always_accepted(runs: Path) -> None:
    init(runs)
    ok(r(runs, "finalize", "r", "needs_attention", "--result", "x"))
    ok(r(runs, "finalize", "r", "aborted"))
    assert json.loads(ok(r(runs, "get", "r", "--summary")))["status"] == "aborted"


# --- gc ----------------------------------------------------------------------------------------------


def test_gc(runs: Path, tmp_path: Path) -> None:
    assert ok(cli("gc", str(tmp_path / "none"), cwd=tmp_path)) == "0 archived (no runs dir)\n"
    init(runs, "live")
    init(runs, "fin")
    ok(r(runs, "finalize", "fin", "aborted"))
    assert ok(r(runs, "gc")) == f"0 archived to {runs}/archive (terminal runs older than 7d)\n"
    assert ok(r(runs, "gc", "--keep-days", "0")) == f"1 archived to {runs}/archive (terminal runs older than 0d)\n"
    assert ok(cli("gc", str(runs), "--keep-days", "0.5", cwd=tmp_path)) == (
        f"0 archived to {runs}/archive (terminal runs older than 0.5d)\n")
    assert (runs / "live.json").exists() and not (runs / "fin.json").exists()
    assert not (runs / "fin.journal.jsonl").exists()
    for bad in ("-1", "abc", "nan"):
        assert_error(r(runs, "gc", "--keep-days", bad), 1, "--keep-days must be a non-negative number")
    assert_error(r(runs, "gc", "--keep-days"), 1, "option --keep-days is missing its value")


def test_dir_option_and_env(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert ok(cli("init", "x", "--task", "t", "--dir", str(a), runs=b)) == "x\n"
    assert (a / "x.json").exists() and not b.exists()
    ok(cli("unit", "x", "u", "done", "--dir", str(a)))
    assert_error(cli("get", "x", runs=b), 3)
    # Without either: the nearest .resumable/runs walking up, else ./.resumable/runs.
    sub = tmp_path / "proj" / "deep"
    sub.mkdir(parents=True)
    (tmp_path / "proj" / ".resumable" / "runs").mkdir(parents=True)
    ok(cli("init", "w", "--task", "t", cwd=sub))
    assert (tmp_path / "proj" / ".resumable" / "runs" / "w.json").exists()


def test_seed_file_through_the_cli(tmp_path: Path) -> None:
    v1 = {"schemaVersion": 1, "id": "old", "task": "t", "status": "running", "units": {"a": {"status": "done"}}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(v1, indent=2) + "\n")
    data = path.read_bytes()
    assert json.loads(ok(cli("get", str(path), cwd=tmp_path))) == v1
    ok(cli("resume", str(path), cwd=tmp_path))
    ok(cli("get", str(path), "--summary", cwd=tmp_path))
    assert path.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
    assert_error(cli("unit", str(path), "a", "pending", cwd=tmp_path), 2)
    ok(cli("unit", str(path), "b", "done", cwd=tmp_path))
    doc, _marker = snapshot_file(path)
    assert doc["schemaVersion"] == 2 and doc["resolvedItems"] == [] and doc["units"]["a"] == v1["units"]["a"]
    assert [e["t"] for _, e in records(tmp_path / "old.journal.jsonl")] == ["base", "unit"]


# --- no traceback, ever ---------------------------------------------------------------------------

tokens = st.sampled_from(["r", "a", "done", "pending", "--note", "--deps", "--json", "--ids", "--task", "--units",
                          "--summary", "--keep-days", "--launch", "--id", "{", "[]", '{"a":1}', "x,y", "", " ",
                          "..", "-h", "--dir=", "a b", "null", "green", "needs_attention", "1e400", "é"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["init", "unit", "phase", "get", "resume", "item", "resolve", "validation", "finalize",
                        "gc"]), st.lists(tokens, max_size=6))
def test_no_traceback_for_any_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], verb: str, argv: list[str]
) -> None:
    """In-process (fast) fuzz of the seed verbs: every outcome is an exit code and, on error, one line."""
    runs = tmp_path / "fuzz-runs"
    monkeypatch.setenv("RESUMABLE_DIR", str(runs))
    monkeypatch.chdir(tmp_path)
    if not (runs / "r.json").exists():
        assert main(["init", "r", "--task", "t", "--units", "a"]) == 0
    capsys.readouterr()
    try:
        code = main([verb, *argv])
    except SystemExit as exc:  # click's help path
        code = exc.code if isinstance(exc.code, int) else 0
    _out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3), (verb, argv, code, err)
    assert "Traceback" not in err
    if code != 0 and "--help" not in argv and "-h" not in argv:
        assert len(err.splitlines()) == 1 and err.startswith("resumable: "), (verb, argv, err)


def test_undecodable_argument_bytes(runs: Path) -> None:
    """Arguments that are not UTF-8 are refused in one line, before any run file is created."""
    for args in (["init", "r", "--task", b"t\xff"], ["init", "r", "--task", "t", "--units", b"a\xff"],
                 ["init", "r", "--task", "t", "--launch", b'{"scriptPath": "\xff"}']):
        proc = subprocess.run([RESUMABLE, *args], capture_output=True, text=True, env=env_of(runs), check=False)
        assert_error(proc, 1)
        assert not (runs / "r.journal.jsonl").exists() and not (runs / "r.json").exists()
    init(runs)
    before = tree(runs)
    for args in (["unit", "r", b"\xff", "done"], ["unit", "r", "a", "done", "--note", b"n\xff"],
                 ["item", "r", "--json", b'{"a": "\xff"}'], ["phase", "r", b"p\xff", "done"]):
        proc = subprocess.run([RESUMABLE, *args], capture_output=True, text=True, env=env_of(runs), check=False)
        assert_error(proc, 1)
    assert tree(runs) == before


def env_of(runs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DIR"] = str(runs)
    return env


junk_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8,
)
doc_keys = st.sampled_from(["schemaVersion", "id", "task", "status", "units", "phases", "openItems", "resolvedItems",
                            "requiredPhases", "requireValidation", "finalValidation", "pipeline", "launch", "_journal",
                            "currentPhase", "updatedAt"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.dictionaries(doc_keys, junk_json, max_size=8), junk_json.map(lambda v: {"units": {"a": v}}),
                 st.binary(max_size=40).map(lambda b: b"RAW" + b)),
       st.sampled_from([["get", "h"], ["get", "h", "--summary"], ["resume", "h"], ["unit", "h", "a", "done"],
                        ["unit", "h", "b", "pending", "--deps", "a"], ["phase", "h", "p", "running"],
                        ["item", "h", "--json", '{"a":1}'], ["resolve", "h", "--ids", "x"],
                        ["validation", "h", "green"], ["finalize", "h", "done"], ["finalize", "h", "aborted"],
                        ["init", "h", "--task", "t"], ["gc", "--keep-days", "0"]]))
def test_malformed_run_files_never_crash_a_verb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], content: object,
    argv: list[str]
) -> None:
    runs = tmp_path / "junk-runs"
    runs.mkdir(exist_ok=True)
    for p in runs.iterdir():
        if p.is_file():
            p.unlink()
    data = content[3:] if isinstance(content, bytes) else json.dumps(content, indent=2).encode()
    (runs / "h.json").write_bytes(data)
    monkeypatch.setenv("RESUMABLE_DIR", str(runs))
    capsys.readouterr()
    code = main(list(argv))
    _out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3), (argv, code, err)
    if code:
        assert len(err.splitlines()) == 1 and err.startswith("resumable: "), (argv, err)
    else:
        assert err == ""


def test_rerun_skips_units_already_pending(runs: Path) -> None:
    init(runs, "r", "a,b,c")
    ok(r(runs, "unit", "r", "a", "done"))
    journal = runs / "r.journal.jsonl"
    before = journal.read_bytes()
    assert ok(r(runs, "rerun", "r", "b", "c")) == "r: already pending: 2 (b, c)\n"
    assert journal.read_bytes() == before  # no invalidation recorded for what runs next time anyway
    assert ok(r(runs, "rerun", "r", "a", "b")) == "r: 1 unit(s) will run again: a\nr: already pending: 1 (b)\n"
    doc = json.loads(ok(r(runs, "get", "r")))
    assert len(doc["units"]["a"]["invalidations"]) == 1 and "invalidations" not in doc["units"]["b"]
    assert ok(r(runs, "rerun", "r", "a")) == "r: already pending: 1 (a)\n"
    assert_error(r(runs, "rerun", "r", "b", "nope"), 1, "has no unit nope")  # bad ids still refused


def test_install_lines_work_from_a_checkout() -> None:
    """The package is not on the index yet: every install line the README and the Getting started
    page give installs this checkout (`.` or `.[extra]` with an extra pyproject.toml defines), and
    they say so."""
    import tomllib

    readme = "\n".join((ROOT / p).read_text() for p in ("README.md", "docs/getting-started.md"))
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    installs = [line.split("#")[0].strip() for line in readme.splitlines()
                if re.match(r"\s*(python3 -m venv \S+ && )?(\.venv/bin/)?pipx? install ", line)]
    assert len(installs) >= 5, installs
    for line in installs:
        for target in re.findall(r"pipx? install (?:-[eU] |--force )*('[^']*'|\S+)", line):
            m = re.fullmatch(r"'?\.(?:\[([a-z,]+)\])?'?", target)
            assert m is not None, f"README installs {target!r}, which does not work from a checkout: {line}"
            assert set((m.group(1) or "").split(",")) - {""} <= extras, line
    assert "not on the package index yet" in readme and "published as **`resumable-runs`**" in readme
