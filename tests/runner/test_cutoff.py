"""Early cutoff: a step whose needs re-ran is re-run only if what they made changed, by content."""

from __future__ import annotations

from pathlib import Path

from runnerhelpers import run_cli, units, write

from resumable.core import policy

# a -> b -> c -> d. b counts a's lines: editing a line's text changes a.out but not b.out.
JOB = """
[job]
name = "cut"
[steps.a]
run = "cp src.txt a.out; echo a >> trace"
inputs = ["src.txt"]
artifacts = ["a.out"]
[steps.b]
run = "wc -l < a.out > b.out; echo b >> trace"
needs = ["a"]
artifacts = ["b.out"]
[steps.c]
run = "cat b.out > c.out; echo c >> trace"
needs = ["b"]
artifacts = ["c.out"]
[steps.d]
run = "echo d >> trace"
needs = ["c"]
"""


def _trace(work: Path) -> list[str]:
    return (work / "trace").read_text().split()


def test_three_levels_where_the_middle_output_is_byte_identical(work: Path) -> None:
    write(work / "src.txt", "one\ntwo\n")
    write(work / "resumable.toml", JOB)
    assert run_cli([]).exit_code == 0
    assert _trace(work) == ["a", "b", "c", "d"]
    first_b = units(work, "cut")["b"]["fingerprint"]["needs"]

    write(work / "src.txt", "one\nTWO\n")  # same line count: b.out comes out the same
    plan = run_cli(["--dry-run"]).output
    assert "run   a: input changed: src.txt" in plan
    assert "run   b: upstream re-runs: a (kept done if what it made comes out the same)" in plan
    assert "run   c: upstream re-runs: b (kept done if what it made comes out the same)" in plan
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert _trace(work) == ["a", "b", "c", "d", "a", "b"]  # c and d did not run again
    assert f"skip   c ({policy.CUTOFF_REASON})" in r.output
    assert f"skip   d ({policy.KEPT_REASON})" in r.output
    assert "cut: done" in r.output
    u = units(work, "cut")
    assert [x["status"] for x in u.values()] == ["done"] * 4
    assert len(u["c"]["attempts"]) == 1 and not u["c"].get("invalidations")  # never demoted
    assert u["b"]["fingerprint"]["needs"] != first_b  # b ran on the new a.out, and says so
    assert "skip  c: done" in run_cli(["--dry-run"]).output

    write(work / "src.txt", "one\ntwo\nthree\n")  # now b.out changes: c and d run
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert _trace(work)[6:] == ["a", "b", "c", "d"]
    assert units(work, "cut")["c"]["invalidations"][-1]["reason"] == "upstream re-ran: b"


def test_a_step_with_no_artifacts_or_inputs_reruns_when_a_need_reran(work: Path) -> None:
    write(work / "src.txt", "x\n")
    write(work / "resumable.toml", """
[job]
name = "plain"
[steps.a]
run = "cp src.txt a.out; echo a >> trace"
inputs = ["src.txt"]
artifacts = ["a.out"]
[steps.report]
run = "echo report >> trace"
needs = ["a"]
""")
    assert run_cli([]).exit_code == 0
    write(work / "src.txt", "x\n")  # touched: same content, a is not even re-run
    assert "skip  a: done" in run_cli(["--dry-run"]).output
    write(work / "src.txt", "y\n")
    assert run_cli([]).exit_code == 0
    assert _trace(work) == ["a", "report", "a", "report"]


def test_an_upstream_that_changed_while_its_dependent_waited_is_caught_next_time(work: Path) -> None:
    """b re-ran and made something else while c was left done (b run alone, as a target; or a
    runner stopped between the two): the next run compares what b made with what c last ran on."""
    write(work / "src.txt", "one\n")
    write(work / "resumable.toml", JOB)
    assert run_cli([]).exit_code == 0
    write(work / "src.txt", "one\ntwo\n")
    assert run_cli(["b"]).exit_code == 0
    assert _trace(work)[4:] == ["a", "b"]
    plan = run_cli(["--dry-run"]).output
    assert "run   c: upstream artifacts changed: b" in plan
    assert "run   d: upstream re-runs: c (kept done if what it made comes out the same)" in plan
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert _trace(work)[6:] == ["c", "d"]  # c.out changed, and d declares nothing: make's rule
    # An artifact edited by hand is the step's own business: it runs again.
    write(work / "b.out", "99\n")
    assert "run   b: artifact changed: b.out" in run_cli(["--dry-run"]).output


def test_policy_keeps_done_only_on_identical_content() -> None:
    fp = {"needs": {"a": "x", "b": "y"}}
    assert policy.keeps_done(True, fp, {"a": "x", "b": "y"}, ["a"])
    assert not policy.keeps_done(True, fp, {"a": "z", "b": "y"}, ["a"])
    assert not policy.keeps_done(False, fp, {"a": "x", "b": "y"}, ["a"])  # no files: make's rule
    assert policy.keeps_done(False, fp, {"a": "x", "b": "y"}, [])  # nothing re-ran
    assert not policy.keeps_done(True, {"needs": {"a": None}}, {"a": None}, ["a"])  # nothing to compare
    assert not policy.keeps_done(True, {}, {"a": "x"}, ["a"])  # recorded before needs were
    assert policy.artifacts_digest({"p": {"sha256": "1"}}) == policy.artifacts_digest({"p": {"sha256": "1"}})
    assert policy.artifacts_digest({"p": {"sha256": "1"}}) != policy.artifacts_digest({"p": {"sha256": "2"}})
    assert policy.artifacts_digest({}) is None and policy.artifacts_digest({"p": None}) is None
