"""The seed verbs' contract, the same test functions against a runs directory and a PostgreSQL
store: outputs, exit codes, one-line errors, refusals that change nothing, concurrent inits; and a
whole transcript of commands whose outputs must be the same in both stores."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pgtests import RESUMABLE, assert_error, ok
from storecase import StoreCase, clean


def init(store: StoreCase, run_id: str = "r", units: str = "a,b", *extra: str) -> None:
    assert ok(store.r("init", run_id, "--task", "the task", "--units", units, *extra)) == f"{run_id}\n"


def test_init_get_and_summary(store: StoreCase) -> None:
    init(store, "r", "a,b,c")
    ok(store.r("unit", "r", "a", "done"))
    ok(store.r("unit", "r", "b", "in_progress", "--note", "working"))
    out = ok(store.r("get", "r"))
    assert out.startswith('{\n  "schemaVersion": 2,\n  "id": "r",') and "_journal" not in out
    doc = json.loads(out)
    assert doc["units"]["b"]["note"] == "working" and doc["units"]["b"]["startedAt"]
    summary = json.loads(ok(store.r("get", "r", "--summary")))
    assert summary == {"id": "r", "status": "running", "task": "the task", "currentPhase": None, "total": 3,
                       "done": 1, "blocked": [], "dep_blocked": [], "in_progress": ["b"],
                       "updatedAt": summary["updatedAt"]}


def test_done_is_never_demoted_and_the_refusal_changes_nothing(store: StoreCase) -> None:
    init(store, "r", "a,b")
    ok(store.r("unit", "r", "a", "done"))
    ok(store.r("unit", "r", "a", "done"))  # done -> done is fine
    before = store.state()
    for state in ("pending", "in_progress", "blocked", "dep_blocked", "failed", "timeout", "interrupted"):
        assert_error(store.r("unit", "r", "a", state), 2,
                     "unit 'a' is already done — refusing to demote it (resume must skip done units)")
    assert store.state() == before
    assert json.loads(ok(store.r("get", "r")))["units"]["a"]["status"] == "done"


def test_finalize_done_is_fail_closed(store: StoreCase) -> None:
    init(store, "r", "a,b", "--required-phases", "ship", "--require-validation")
    ok(store.r("phase", "r", "lint", "blocked"))
    ok(store.r("item", "r", "--json", '{"a":1}'))
    before = store.state()
    line = assert_error(store.r("finalize", "r", "done"), 2)
    assert line == ("resumable: refusing finalize done — 2 unit(s) not done: a, b; 1 phase(s) blocked: lint; "
                    "1 required phase(s) not done: ship; 1 open finding(s) in openItems; "
                    "final validation is absent (use needs_attention)")
    assert store.state() == before
    for args in (["unit", "r", "a", "done"], ["unit", "r", "b", "done"], ["phase", "r", "lint", "done"],
                 ["phase", "r", "ship", "done"], ["resolve", "r", "--ids", "f-9f89c740ceb4"],
                 ["validation", "r", "green"]):
        ok(store.r(*args)) if args[0] != "resolve" else store.r(*args)
    assert ok(store.r("finalize", "r", "done", "--result", "all green")) == ""
    doc = json.loads(ok(store.r("get", "r")))
    assert doc["status"] == "done" and doc["result"] == "all green" and doc["finishedAt"]


def test_init_over_live_refused_over_finished_starts_afresh(store: StoreCase) -> None:
    init(store)
    before = store.state()
    assert_error(store.r("init", "r", "--task", "again"), 2, "is a LIVE checkpoint (status=running)")
    assert store.state() == before
    ok(store.r("finalize", "r", "needs_attention"))
    assert_error(store.r("init", "r", "--task", "again"), 2, "status=needs_attention")
    ok(store.r("finalize", "r", "aborted"))
    init(store, "r", "z")
    doc = json.loads(ok(store.r("get", "r")))
    assert list(doc["units"]) == ["z"] and doc["status"] == "running"
    assert [line.split()[1] for line in ok(store.r("log", "r")).splitlines()] == ["#1"]  # a history of its own


def test_bad_run_ids_change_nothing(store: StoreCase) -> None:
    init(store)
    before = store.state()
    for run_id, verb, extra in (("..", "init", ["--task", "t"]), ("x" * 200, "unit", ["a", "done"]),
                                ("a b", "get", []), ("é", "resume", []), ("a..b", "item", ["--json", "1"])):
        assert_error(store.r(verb, run_id, *extra), 1, "invalid run id")
    assert store.state() == before


def test_missing_runs_exit_3(store: StoreCase) -> None:
    init(store)
    before = store.state()
    for args in (["unit", "nope", "a", "done"], ["get", "nope"], ["resume", "nope"], ["item", "nope", "--json", "1"],
                 ["finalize", "nope", "aborted"]):
        assert_error(store.r(*args), 3, "no such run")
    assert store.state() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["unit", "r", "a"], "unit requires <unit-id> <pending|in_progress|done|blocked|dep_blocked"),
        (["unit", "r", "a", "done", "--note"], "option --note is missing its value"),
        (["unit", "r", "a b", "done"], "contains commas/whitespace"),
        (["unit", "r", "a", "pending", "--deps", "x y,z"], "'x y' contains commas/whitespace"),
        (["item", "r", "--json", "{x"], "item --json is not valid JSON"),
        (["resolve", "r"], "resolve requires --ids"),
        (["validation", "r", "maybe"], "validation requires <green|red>"),
        (["finalize", "r", "finished"], "finalize requires <done|needs_attention|aborted>"),
        (["phase", "r", "build", "finished"], "unknown phase state 'finished'"),
        (["item", "r", "--json", "[" * 300 + "]" * 300], "nested deeper than 200 levels"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(store: StoreCase, args: list[str], message: str) -> None:
    init(store)
    before = store.state()
    assert_error(store.r(*args), 1, message)
    assert store.state() == before


def test_undecodable_argument_bytes_change_nothing(store: StoreCase) -> None:
    init(store)
    before = store.state()
    for args in (["unit", "r", b"\xff", "done"], ["unit", "r", "a", "done", "--note", b"n\xff"],
                 ["item", "r", "--json", b'{"a": "\xff"}']):
        assert_error(store.r(*args), 1)
    assert store.state() == before


def test_concurrent_inits_exactly_one_wins(store: StoreCase) -> None:
    procs = [subprocess.Popen([RESUMABLE, "init", "r", "--task", f"task {i}"], env=store.env, cwd=store.tmp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(8)]
    results = [(p.wait(60), *p.communicate()) for p in procs]
    winners = [r for r in results if r[0] == 0]
    assert len(winners) == 1 and winners[0][1] == "r\n", results
    for code, out, err in results:
        if code:
            assert code == 2 and out == "" and "LIVE checkpoint" in err and len(err.splitlines()) == 1
    assert [line.split()[2] for line in ok(store.r("log", "r")).splitlines()] == ["init"]


def test_gc_archives_only_old_finished_runs(store: StoreCase) -> None:
    init(store, "live")
    init(store, "fin")
    ok(store.r("finalize", "fin", "aborted"))
    out = ok(store.r("gc"))
    assert out.startswith("0 archived to ") and out.endswith(" (terminal runs older than 7d)\n")
    assert ok(store.r("gc", "--keep-days", "0")).startswith("1 archived to ")
    ok(store.r("get", "live"))
    assert_error(store.r("get", "fin"), 3)
    for bad in ("-1", "abc", "nan"):
        assert_error(store.r("gc", "--keep-days", bad), 1, "--keep-days must be a non-negative number")
    init(store, "fin")  # the name is free again


TRANSCRIPT: list[list[str]] = [
    ["init", "t", "--task", "the transcript", "--units", "a,b,c,d,e,f", "--required-phases", "build"],
    ["unit", "t", "b", "pending", "--deps", "a"], ["unit", "t", "c", "pending", "--deps", "b"],
    ["unit", "t", "d", "pending", "--deps", "q"], ["unit", "t", "e", "pending", "--deps", "f"],
    ["unit", "t", "f", "pending", "--deps", "e"], ["resume", "t"], ["unit", "t", "a", "done", "--note", "ok"],
    ["resume", "t"], ["unit", "t", "a", "failed"], ["phase", "t", "build", "running"],
    ["item", "t", "--json", '[{"phase":"test","issue":"gap"}, {"id":"mine"}, "note", 3]'],
    ["item", "t", "--json", '{"a":1}'], ["resolve", "t", "--ids", "mine, nope,"],
    ["resolve", "t", "--json", '["f-9f89c740ceb4"]'], ["validation", "t", "fail", "--note", "ci #4"],
    ["finalize", "t", "done"], ["get", "t", "--summary"], ["get", "t"], ["phase", "t", "build", "done"],
    ["unit", "t", "new", "blocked"], ["finalize", "t", "needs_attention", "--result", "later"],
    ["init", "t", "--task", "again"], ["get", "nope"], ["unit", "t", "x", "bogus"], ["finalize", "t", "aborted"],
    ["init", "t", "--task", "second life", "--units", "z"], ["get", "t"], ["log", "t"], ["log", "t", "--json"],
    ["status", "t", "--no-color"], ["status", "t", "--json"], ["status", "t", "--resume", "--json"],
    ["status", "t", "--units", "pending", "--no-color"], ["status", "nope"],
]


def transcript(store: StoreCase) -> list[tuple[int, str, str]]:
    out = []
    for args in TRANSCRIPT:
        proc = store.r(*args)
        err = store.normal(proc.stderr)
        if proc.returncode == 3:
            err = "<no such run>"  # where a missing run would have been differs by design
        stdout = re.sub(r"(running for|ran) [0-9][^\n]*", r"\1 <duration>", store.normal(proc.stdout))
        out.append((proc.returncode, stdout, err))
    return out


def test_the_same_transcript_in_both_stores(tmp_path: Path, pg_url: str) -> None:
    """Every verb, refusal and reader, run in order against each store: the same exit codes and the
    same output, but for stamps and where the run lives."""
    files = StoreCase("files", tmp_path / "f", None)
    pg = StoreCase("postgres", tmp_path / "p", pg_url)
    for case in (files, pg):
        case.tmp.mkdir()
    a, b = transcript(files), transcript(pg)
    for args, x, y in zip(TRANSCRIPT, a, b, strict=True):
        if args[0] == "log" and "--json" in args:
            # The records themselves are equal once the stamps (inside the checksummed text) are masked.
            x, y = _mask_crc(x), _mask_crc(y)
        assert x == y, (args, x, y)
    clean(pg_url)


def _mask_crc(entry: tuple[int, str, str]) -> tuple[int, str, str]:
    return entry[0], re.sub(r'"crc":"[0-9a-f]{8}"', '"crc":"<crc>"', entry[1]), entry[2]


def test_api_against_both_stores(store: StoreCase, monkeypatch: pytest.MonkeyPatch) -> None:
    import resumable

    for key, value in store.env.items():
        monkeypatch.setenv(key, value)
    run = resumable.open_run("api")
    assert not run.exists()
    run.init("migrate users", units=["extract", "load"])
    run.unit("load", "pending", deps=["extract"])
    assert run.resume_set() == {"skip": [], "eligible": ["extract"], "dep_blocked": {"load": "extract"}}
    run.unit("extract", "done", note="42 rows")
    ids = run.item({"phase": "load", "issue": "3 rows without email"})
    with pytest.raises(resumable.RefusedError):
        run.finalize("done")
    assert run.resolve(ids) == ids
    run.unit("load", "done")
    run.finalize("done", result="all rows copied")
    history: list[dict[str, Any]] = run.history()
    assert [e["t"] for e in history] == ["init", "unit", "unit", "item", "resolve", "unit", "finalize"]
    assert [e["seq"] for e in history] == list(range(1, 8))
    assert "all rows copied" in run.report_html()
    run.close()
