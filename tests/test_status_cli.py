"""`resumable status` through the CLI: discovery, every flag, exit codes, and that it never writes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from resumable import store
from resumable.cli import status as status_cli
from resumable.cli.status import status_command
from resumable.view import watch as view_cli
from resumable.view.printer import Printer
from status_fixtures import base_doc, big_doc, rich_doc, tree_state, ts, unit, write_doc


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    d = tmp_path / "project" / ".resumable" / "runs"
    write_doc(d, base_doc("run-old", updatedAt=ts(100), status="done", finishedAt=ts(100),
                          units={"a": unit("done")}))
    write_doc(d, rich_doc("run-rich"))  # updatedAt ts(600): the newest
    write_doc(d, base_doc("alpha-1", updatedAt=ts(300), currentPhase="build",
                          units={"a": unit("done"), "b": unit("pending")}))
    return d


def status(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(status_command, list(args), env=env, catch_exceptions=False)


def test_no_run_means_newest(runs: Path) -> None:
    r = status("--dir", str(runs))
    assert r.exit_code == 0
    assert "run-rich" in r.stdout and "build the thing" in r.stdout


@pytest.mark.parametrize("arg", ["alpha-1", "alph", "alpha-1.json"])
def test_pick_by_id_prefix_or_file_name(runs: Path, arg: str) -> None:
    r = status("--dir", str(runs), arg)
    assert r.exit_code == 0
    assert "id alpha-1 " in r.stdout


def test_pick_by_path(runs: Path) -> None:
    r = status(str(runs / "run-old.json"))
    assert r.exit_code == 0 and "id run-old " in r.stdout
    assert "✓ converged: nothing to resume" in r.stdout


def test_discovery_walks_up_from_cwd(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = runs.parent.parent / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    monkeypatch.delenv("RESUMABLE_DIR", raising=False)
    assert "id alpha-1 " in status("alpha").stdout
    monkeypatch.setenv("RESUMABLE_DIR", str(runs))
    monkeypatch.chdir(runs.anchor)
    assert "id alpha-1 " in status("alpha").stdout


def test_no_match_exits_3(runs: Path) -> None:
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "nope"])
    assert r.exit_code == 3
    assert r.stderr.strip() == f'resumable: no run matches "nope" under {runs}'
    assert r.stdout == ""


def test_missing_path_exits_3(tmp_path: Path) -> None:
    r = CliRunner().invoke(status_command, [str(tmp_path / "gone.json")])
    assert r.exit_code == 3 and "no run matches" in r.stderr


def test_no_runs_at_all_is_friendly(tmp_path: Path) -> None:
    r = status("--dir", str(tmp_path / "empty"))
    assert r.exit_code == 0
    assert "no runs yet" in r.stdout
    assert not (tmp_path / "empty").exists()  # a reader never creates the runs directory
    r = status("--dir", str(tmp_path / "empty"), "--list")
    assert r.exit_code == 0 and "no runs yet" in r.stdout
    assert json.loads(status("--dir", str(tmp_path), "--list", "--json").stdout) == []


def test_named_run_in_an_empty_project_exits_3(tmp_path: Path) -> None:
    # The seed exits 0 here (its bug 11): a run named explicitly that does not exist is an error.
    r = CliRunner().invoke(status_command, ["--dir", str(tmp_path), "run-x"])
    assert r.exit_code == 3 and "no run matches \"run-x\"" in r.stderr


def test_list_newest_first_with_unreadable(runs: Path) -> None:
    (runs / "broken.json").write_text('{"id": "broken", "units": {"a": ')
    os.utime(runs / "broken.json", (0, 0))  # mtime 1970: sorts last
    r = status("--dir", str(runs), "--list")
    header, *lines = r.stdout.splitlines()
    assert header == f"4 runs under runs directory {runs} (given with --dir), newest first"
    assert [x.split()[1] for x in lines[:3]] == ["run-rich", "alpha-1", "run-old"]
    assert lines[1].split()[2:4] == ["build", "1/2"]
    assert lines[0].split()[2] == "test"
    assert lines[2].split()[2] == "—"
    assert lines[-1].startswith("! broken.json (unreadable: ")
    assert r.stdout.count("ago") == 3


def test_list_json(runs: Path) -> None:
    (runs / "broken.json").write_text("[1, 2")
    data = json.loads(status("--dir", str(runs), "--list", "--json").stdout)
    ids = [d.get("id") for d in data if "id" in d]
    assert ids == ["run-rich", "alpha-1", "run-old"]
    bad = [d for d in data if "error" in d]
    assert bad[0]["file"] == str(runs / "broken.json")


def test_json_is_the_document(runs: Path) -> None:
    r = status("--dir", str(runs), "--json", "run-rich")
    assert json.loads(r.stdout) == rich_doc("run-rich")


def test_json_includes_the_journal_tail(tmp_path: Path) -> None:
    from resumable.api import open_run
    from resumable.store.files.journal import encode

    runs = tmp_path / "runs"
    run = open_run("live", runs_dir=runs)
    run.init("journal tail", units=["a", "b"])
    run.close()
    journal = runs / "live.journal.jsonl"
    data = journal.read_bytes()
    seq = len(data.splitlines()) + 1
    # A record the snapshot has not caught up with yet (a writer's amortised snapshot refresh).
    journal.write_bytes(data + encode(seq, {"t": "unit", "unit": "a", "state": "done", "at": ts(5)}))
    snap = json.loads((runs / "live.json").read_text())
    assert snap["units"]["a"]["status"] == "pending"
    doc = json.loads(status("--dir", str(runs), "--json", "live").stdout)
    assert doc["units"]["a"]["status"] == "done"
    assert "_journal" not in doc
    assert "1/2 done" in status("--dir", str(runs), "live").stdout


def test_json_of_an_unreadable_run(runs: Path) -> None:
    (runs / "trunc.json").write_text(json.dumps(rich_doc("trunc"), indent=2)[:200])
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "--json", "trunc"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["file"] == str(runs / "trunc.json")
    assert json.loads(r.stdout)["error"]


def test_truncated_file_is_one_line_error(runs: Path) -> None:
    (runs / "trunc.json").write_text(json.dumps(rich_doc("trunc"), indent=2)[:200])
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "trunc"])
    assert r.exit_code == 1
    assert r.stderr.startswith("resumable: ") and r.stderr.count("\n") == 1
    assert "trunc.json" in r.stderr and "Traceback" not in r.stderr


def test_newest_readable_run_is_picked_over_an_unreadable_one(runs: Path) -> None:
    (runs / "zz.json").write_text("{")  # newest by mtime, unreadable
    r = status("--dir", str(runs))
    assert r.exit_code == 0 and "id run-rich " in r.stdout


def test_null_unit_and_non_object_document(runs: Path) -> None:
    write_doc(runs, base_doc("nul", units={"a": None, "b": unit("done")}))
    r = status("--dir", str(runs), "nul")
    assert r.exit_code == 0 and "? a  malformed unit (null)" in r.stdout
    write_doc(runs, [1, 2], name="arr.json")
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "arr"])
    assert r.exit_code == 1 and r.stderr.startswith("resumable: ")


def test_seed_v1_document(runs: Path) -> None:
    v1 = {"schemaVersion": 1, "id": "v1run", "task": "old", "status": "running",
          "createdAt": ts(0), "updatedAt": ts(1), "phases": {},
          "units": {"a": {"status": "done"}, "b": {"status": "blocked", "note": "why"}}}
    write_doc(runs, v1)
    r = status("--dir", str(runs), "v1run")
    assert r.exit_code == 0
    assert "1/2 done" in r.stdout and "open     0   resolved 0" in r.stdout
    assert "■ b  blocked  — why" in r.stdout


LAUNCHES: dict[str, Any] = {
    "resumable": {"kind": "resumable", "argv": ["resumable", "run", "job.toml", "--id", "L"],
                  "cwd": "/srv/p q"},
    "codex-cli": {"scriptPath": "scripts/pipeline.mjs", "args": {"command": "resume", "run": "L"}},
    "legacy-workflow": {"scriptPath": "pipeline-workflow.js", "args": {"mode": "full"}},
    "no-launch": None,
}


@pytest.mark.parametrize("kind", list(LAUNCHES))
def test_resume_json_every_kind(runs: Path, kind: str) -> None:
    doc = base_doc("L", units={"a": unit("done"), "b": unit("failed"),
                               "c": unit("pending", dependsOn=["b"])})
    if LAUNCHES[kind] is not None:
        doc["launch"] = LAUNCHES[kind]
    write_doc(runs, doc)
    r = status("--dir", str(runs), "--resume", "--json", "L")
    assert r.exit_code == 0
    desc = json.loads(r.stdout)
    assert desc["kind"] == kind
    assert desc["resumeSet"] == {"skip": ["a"], "eligible": ["b"], "dep_blocked": {"c": "b"}}
    assert desc["runnable"] is (kind in ("resumable", "codex-cli"))
    text = status("--dir", str(runs), "--resume", "L").stdout
    commands = [x for x in text.splitlines() if not x.startswith(("#", " ", "{", "}", "["))]
    if kind == "resumable":
        # The runs directory status was given (--dir) is repeated: the command pastes anywhere.
        assert commands == [f"cd '/srv/p q' && resumable run job.toml --id L --dir {runs}"]
        assert desc["argv"] == ["resumable", "run", "job.toml", "--id", "L", "--dir", str(runs)]
    elif kind == "codex-cli":
        assert commands == ["node pipeline.mjs resume --run L"]  # the seed's command, exactly
    else:
        assert commands == []
        assert "skip 1 done · re-run 1 eligible · 1 dep-blocked" in text


def test_resume_json_unreadable(runs: Path) -> None:
    (runs / "bad.json").write_text("{nope")
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "--resume", "--json", "bad"])
    assert r.exit_code == 1
    desc = json.loads(r.stdout)
    assert desc["kind"] == "unreadable" and desc["runnable"] is False
    assert desc["file"] == str(runs / "bad.json")


def test_units_state(runs: Path) -> None:
    r = status("--dir", str(runs), "run-rich", "--units", "failed")
    assert r.stdout.splitlines() == [
        "  ✗ compile  failed  attempt 2 · exit 2 · 35s · log logs/compile.2.log  — compiler crashed"]
    assert "docs" in status("--dir", str(runs), "run-rich", "--units", "running").stdout
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "--units", "bogus"])
    assert r.exit_code == 1 and r.stderr.startswith("resumable: unknown unit state 'bogus'")


def test_unknown_flag_is_a_one_line_usage_error(runs: Path) -> None:
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "--frobnicate"])
    assert r.exit_code == 1
    assert r.stderr.startswith("resumable: ") and r.stderr.count("\n") == 1


def test_no_colour_off_a_terminal_and_with_no_color(runs: Path) -> None:
    assert "\x1b[" not in status("--dir", str(runs)).stdout

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for env, flag, want in (({}, False, True), ({"NO_COLOR": "1"}, False, False),
                            ({}, True, False)):
        old_out, old_env = sys.stdout, os.environ.get("NO_COLOR")
        sys.stdout = Tty()
        os.environ.pop("NO_COLOR", None)
        os.environ.update(env)
        try:
            assert Printer.for_stdout(no_color=flag).color is want
        finally:
            sys.stdout = old_out
            os.environ.pop("NO_COLOR", None)
            if old_env is not None:
                os.environ["NO_COLOR"] = old_env


def test_colour_and_width_on_a_terminal() -> None:
    out = io.StringIO()
    Printer(out, color=True, width=30).lines([[("hello", "bold green"), (" world" * 20, "")]])
    s = out.getvalue()
    assert "\x1b[" in s and "hello" in s
    assert max(len(x) for x in _strip_ansi(s).splitlines()) <= 30
    out = io.StringIO()
    Printer(out, color=False, width=20).lines([[("x" * 50, "bold")]])
    assert out.getvalue() == "x" * 19 + "…\n"


def _strip_ansi(s: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", s)


# ---- never writes -------------------------------------------------------------------------------

READS = [
    [], ["run-rich"], ["alph"], ["--list"], ["--list", "--json"], ["--json"], ["--json", "live"],
    ["--resume"], ["--resume", "--json"], ["--resume", "bad"], ["--resume", "--json", "bad"],
    ["bad"], ["--json", "bad"], ["--units", "failed"], ["--units", "pending", "live"], ["live"],
    ["nope"], ["--no-color", "run-rich"],
]


@pytest.fixture
def busy_runs(runs: Path) -> Iterator[Path]:
    """Seed runs, an unreadable one, and a run written through the core API (journal + lock)."""
    from resumable.api import open_run

    (runs / "bad.json").write_text("{")
    run = open_run("live", runs_dir=runs)
    run.init("live run", units=["a", "b"])
    run.unit("a", "in_progress")
    run.close()
    (runs / "live" / "logs").mkdir(parents=True)
    (runs / "live" / "logs" / "a.1.log").write_text("log\n")
    (runs / "archive").mkdir()
    old = time.time() - 3600
    for p in runs.rglob("*"):
        os.utime(p, (old, old))  # so an accidental touch would show as a changed mtime
    yield runs


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a) or "(none)")
def test_runs_directory_byte_identical_after_read(busy_runs: Path, args: list[str]) -> None:
    before = tree_state(busy_runs)
    CliRunner().invoke(status_command, ["--dir", str(busy_runs), *args])
    assert tree_state(busy_runs) == before


def test_real_entry_point_never_writes(busy_runs: Path) -> None:
    before = tree_state(busy_runs)
    for args in (["status"], ["status", "live", "--resume", "--json"], ["status", "--list"]):
        p = subprocess.run([sys.executable, "-m", "resumable", *args, "--dir", str(busy_runs)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    assert tree_state(busy_runs) == before


# ---- a large run ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import orjson

    d = tmp_path_factory.mktemp("big") / "runs"
    d.mkdir()
    (d / "run-big.json").write_bytes(orjson.dumps(big_doc(100_000), option=orjson.OPT_INDENT_2))
    return d


def test_hundred_thousand_units_default_view(big_runs: Path) -> None:
    r = status("--dir", str(big_runs))
    assert r.exit_code == 0
    assert len(r.stdout.splitlines()) < 40
    assert "80000/100000 done (80%)" in r.stdout


def test_hundred_thousand_units_list_a_state(big_runs: Path) -> None:
    r = status("--dir", str(big_runs), "--units", "failed")
    assert len(r.stdout.splitlines()) == 5000


# ---- --watch --------------------------------------------------------------------------------------

def test_watch_refreshes_until_the_run_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view_cli, "WATCH_INTERVAL", 0.02)
    runs = tmp_path / "runs"
    doc = base_doc("w", units={"a": unit("in_progress", startedAt=ts(0)), "b": unit("pending")})
    write_doc(runs, doc)

    def commit() -> None:  # as the store does: a new file renamed over the snapshot
        tmp = write_doc(runs, doc, name="w.json.tmp")
        os.replace(tmp, runs / "w.json")

    def writer() -> None:
        time.sleep(0.2)
        doc["units"]["a"] = unit("done")
        commit()
        time.sleep(0.2)
        doc["units"]["b"] = unit("done")
        doc["status"] = "done"
        commit()

    thread = threading.Thread(target=writer)
    thread.start()
    t = time.perf_counter()
    r = status("--dir", str(runs), "--watch", "w")
    thread.join()
    assert r.exit_code == 0
    assert time.perf_counter() - t < 10
    frames = r.stdout.split("── ")
    assert "0/2 done" in frames[0]
    assert "2/2 done" in frames[-1] and "converged" in frames[-1]
    assert "ETA" in frames[0]


def test_watch_of_an_ended_run_prints_once(runs: Path) -> None:
    # --wait 0: not waiting for its next session (tests/runner/test_watch_wait.py waits for one).
    r = status("--dir", str(runs), "--watch", "--wait", "0", "run-old")
    assert r.exit_code == 0 and "converged" in r.stdout and "── " not in r.stdout


def test_watch_ctrl_c_exits_130(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(status_cli, "watch_fn", interrupted)
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "--watch", "run-rich"])
    assert r.exit_code == 130


def test_watch_does_not_poll_faster_than_its_interval(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = write_doc(runs, base_doc("w", units={"a": unit("pending")}))
    sleeps: list[float] = []
    stop_after = 5

    def fake_sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == stop_after:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        view_cli.watch(store.open_path(path), lambda d, t: [[("x", "")]],
                       Printer(io.StringIO(), color=False, width=None), sleep=fake_sleep)
    assert sleeps == [view_cli.WATCH_INTERVAL] * stop_after


def test_watch_combined_with_json_is_a_usage_error(runs: Path) -> None:
    r = CliRunner().invoke(status_command, ["--dir", str(runs), "--watch", "--json"])
    assert r.exit_code == 1 and r.stderr.startswith("resumable: --watch")


def test_every_commit_moves_the_change_token(tmp_path: Path) -> None:
    """--watch re-reads only when the handle's change token moves: every commit must move it, even
    one that leaves the snapshot file alone (a large run refreshes its view on a budget)."""
    from resumable.api import open_run
    from resumable.store.files import refresh

    runs = tmp_path / "runs"
    run = open_run("w", runs_dir=runs)
    run.init("watch", units=["a", "b"])
    reader = store.open_path(runs / "w.json")
    before = reader.change_token()
    snap = (runs / "w.json").read_bytes()
    old_exact = refresh.EXACT_SNAPSHOT_BYTES
    refresh.EXACT_SNAPSHOT_BYTES = 0  # the view stays as it is: only the journal changes
    try:
        run.unit("a", "done")
    finally:
        refresh.EXACT_SNAPSHOT_BYTES = old_exact
    assert (runs / "w.json").read_bytes() == snap
    after = reader.change_token()
    assert after != before
    assert reader.wait_for_change(before, 5.0) == after
    assert reader.read()["units"]["a"]["status"] == "done"


def test_no_live_workflow_line_for_a_run_a_claude_workflow_launched(tmp_path: Path) -> None:
    """As the seed's reader: a run launched by a Claude Code Workflow() script is told that no live
    workflow transcript was found, even where this machine has no Claude project directory; other
    runs are not, unless Claude Code works in the project."""
    runs = tmp_path / "project" / ".resumable" / "runs"
    write_doc(runs, base_doc("wf", launch={"scriptPath": "autonomous-pipeline/pipeline-workflow.js",
                                           "args": {"mode": "full"}}))
    write_doc(runs, base_doc("codex", launch={"scriptPath": "pipeline.mjs",
                                              "args": {"command": "resume", "run": "codex"}}))
    write_doc(runs, base_doc("plain"))
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "no-claude")}
    line = "Live workflow  no live workflow transcript found — use /workflows for runtime details"
    assert line in status("--dir", str(runs), "wf", env=env).stdout
    for other in ("codex", "plain"):
        assert "Live workflow" not in status("--dir", str(runs), other, env=env).stdout
    from resumable.view.workflow import project_slug

    (tmp_path / "claude" / "projects" / project_slug(tmp_path / "project")).mkdir(parents=True)
    assert line in status("--dir", str(runs), "plain", env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}).stdout
