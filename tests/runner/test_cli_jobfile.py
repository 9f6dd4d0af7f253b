"""Job files through the CLI: DAG order, -j parallelism, skip reasons, keep-going."""

from __future__ import annotations

import json
from pathlib import Path

from runnerhelpers import run_cli, status_of, units, write


def test_dag_parallel_with_j2(work: Path) -> None:
    # b and c each wait (up to 30 s) for the other to have started: they finish only if they
    # overlapped, which -j 2 must make them do; no duration is asserted.
    wait = "for i in $(seq 300); do test -e {other}.started && break; sleep 0.1; done; test -e {other}.started"
    write(work / "resumable.toml", f"""
[job]
name = "dag"
[steps.a]
run = "echo a >> trace"
[steps.b]
run = "touch b.started; {wait.format(other='c')} && echo b >> trace"
needs = ["a"]
[steps.c]
run = "touch c.started; {wait.format(other='b')} && echo c >> trace"
needs = ["a"]
[steps.d]
run = "echo d >> trace"
needs = ["b", "c"]
""")
    r = run_cli(["-j", "2"])
    assert r.exit_code == 0, r.output
    lines = (work / "trace").read_text().split()
    assert lines[0] == "a" and set(lines[1:3]) == {"b", "c"} and lines[3] == "d"
    assert units(work, "dag")["d"]["dependsOn"] == ["b", "c"]


def test_skip_reasons_input_and_upstream(work: Path) -> None:
    write(work / "in.txt", "1")
    write(work / "resumable.toml", """
[job]
name = "s"
[steps.a]
run = "cat in.txt > a.out; echo a >> trace"
inputs = ["in.txt"]
artifacts = ["a.out"]
[steps.b]
run = "echo b >> trace"
needs = ["a"]
""")
    assert run_cli([]).exit_code == 0
    r = run_cli(["--dry-run"])
    assert "skip  a: done" in r.output and "skip  b: done" in r.output
    write(work / "in.txt", "2")
    r = run_cli(["--dry-run"])
    assert "run   a: input changed: in.txt" in r.output
    assert "run   b: upstream re-runs: a" in r.output
    assert run_cli([]).exit_code == 0
    assert (work / "trace").read_text().split() == ["a", "b", "a", "b"]


def test_keep_going_via_cli_marks_dependents_dep_blocked(work: Path) -> None:
    write(work / "resumable.toml", """
[job]
name = "k"
[steps.bad]
run = "exit 5"
[steps.child]
run = "true"
needs = ["bad"]
[steps.other]
run = "true"
""")
    r = run_cli(["--keep-going"])
    assert r.exit_code == 1
    assert status_of(work, "k") == {"bad": "failed", "child": "dep_blocked", "other": "done"}
    assert units(work, "k")["child"]["blockedBy"] == "bad"
    r = run_cli([])  # without keep-going: stops at the first failure again
    assert status_of(work, "k")["other"] == "done"


def test_bad_job_file_is_one_line(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "x"\n[steps.a]\nrun = "true"\nneeds = ["nope"]\n')
    r = run_cli([])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert "resumable.toml:5" in r.output and "nope" in r.output


def test_example_job_finishes_done_twice(work: Path) -> None:
    import shutil

    example = Path(__file__).resolve().parents[2] / "examples" / "resumable.toml"
    shutil.copy(example, work / "resumable.toml")
    r = run_cli(["-j", "2"])
    assert r.exit_code == 0, r.output
    r = run_cli(["-j", "2"])
    assert r.exit_code == 0, r.output
    assert "(" in r.output and all(v == "done" for v in status_of(work, "example").values())
    assert "start" not in r.output  # everything skipped


def test_quiet_and_j0(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "q"\n[steps.a]\nrun = "echo hi"\n'
                                   '[steps.b]\nrun = "true"\n')
    r = run_cli(["-j", "0", "--quiet"])
    assert r.exit_code == 0 and r.output == "q: done (2 done)\n"


def test_removed_step_keeps_run_needs_attention(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "r"\n[steps.a]\nrun = "true"\n'
                                   '[steps.b]\nrun = "false"\n')
    assert run_cli([]).exit_code == 1
    write(work / "resumable.toml", '[job]\nname = "r"\n[steps.a]\nrun = "true"\n')
    r = run_cli([])
    assert r.exit_code == 1 and "no longer has" in r.output
    from runnerhelpers import doc

    assert doc(work, "r")["status"] == "needs_attention"


def test_explain_and_dry_run_list_reasons(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "e"\n[steps.a]\nrun = "true"\n'
                                   '[steps.b]\nrun = "true"\nneeds = ["a"]\n')
    assert run_cli(["--explain", "b"]).output == "run   b: never ran\n"
    run_cli([])
    assert run_cli(["--explain", "b"]).output == "skip  b: done\n"
    assert run_cli(["--explain", "b", "--force"]).output == "run   b: forced\n"
    r = run_cli(["--explain", "zz"])
    assert r.exit_code == 1 and "no step 'zz'" in r.output


def test_every_job_file_problem_on_its_own_line(work: Path) -> None:
    write(work / "resumable.toml", '[steps.a]\nrun = "true"\nneeds = ["nope"]\n[steps.b]\nrun = 5\n')
    r = run_cli([])
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines == [
        "resumable: resumable.toml:3: [steps.a] needs: unknown step 'nope' in needs",
        "resumable: resumable.toml:5: [steps.b] run: expected a command string or a non-empty list of strings",
        "resumable: resumable.toml: 2 problems in the job file; fix them and run again",
    ]
    assert not (work / "runs").exists()  # nothing written


def test_job_name_defaults_to_the_directory_and_k_keeps_going(work: Path) -> None:
    write(work / "resumable.toml", '[steps.bad]\nrun = "exit 3"\n[steps.other]\nrun = "true"\n')
    r = run_cli(["-k"])
    assert r.exit_code == 1
    assert status_of(work, work.name) == {"bad": "failed", "other": "done"}


def test_dry_run_escapes_file_names_in_reasons(work: Path) -> None:
    write(work / "in\x1b[2Jput", "1")
    write(work / "resumable.toml", '[steps.a]\nrun = "true"\ninputs = ["in\\u001b[2Jput"]\n')
    assert run_cli([]).exit_code == 0
    write(work / "in\x1b[2Jput", "2")
    r = run_cli(["--dry-run"])
    assert r.exit_code == 0 and "\x1b" not in r.output
    assert r.output.splitlines() == ["run   a: input changed: in\\x1b[2Jput",
                                     "1 to run, 0 to skip (dry run: nothing executed or written)"]


def _job(*names: str) -> str:
    return '[job]\nname = "rm"\n' + "".join(f'[steps.{n}]\nrun = "echo {n} >> trace"\n' for n in names)


def test_a_removed_step_is_shown_removed_and_every_count_agrees(work: Path) -> None:
    """A step taken out of the job file: its unit is kept, marked removed, counted in no done/total
    by status, and the runner's summary says the same; put back, it is no longer removed and is
    skipped as done (same fingerprint), its stamps as they were."""
    from runnerhelpers import doc

    from corehelpers import cli

    write(work / "resumable.toml", _job("a", "b", "c"))
    assert run_cli([]).exit_code == 0
    finished = units(work, "rm")["c"]["finishedAt"]
    write(work / "resumable.toml", _job("a", "b"))
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == "rm: done (2 skipped, 1 removed)"
    d = doc(work, "rm")
    assert d["status"] == "done" and d["units"]["c"]["removed"] is True
    counted = {u: v for u, v in d["units"].items() if not v.get("removed")}
    assert (sum(v["status"] == "done" for v in counted.values()), len(counted)) == (2, 2)
    shown = cli("status", "rm", "--no-color", runs=work / "runs").stdout
    assert "2/2 done" in shown and "removed 1" in shown
    recipe = json.loads(cli("status", "rm", "--resume", "--json", runs=work / "runs").stdout)
    assert recipe["resumeSet"] == {"skip": ["a", "b"], "eligible": [], "dep_blocked": {}}
    assert "unit c -> done (removed from the job)" in cli("log", "rm", runs=work / "runs").stdout
    # Nothing changed since: the same summary, nothing written.
    journal = (work / "runs" / "rm.journal.jsonl").read_bytes()
    assert run_cli([]).output.splitlines()[-1] == "rm: done (2 skipped, 1 removed)"
    assert (work / "runs" / "rm.journal.jsonl").read_bytes() == journal

    write(work / "resumable.toml", _job("a", "b", "c"))
    r = run_cli([])
    assert r.exit_code == 0 and r.output.splitlines()[-1] == "rm: done (3 skipped)"
    c = units(work, "rm")["c"]
    assert c["removed"] is False and c["status"] == "done" and c["finishedAt"] == finished
    assert (work / "trace").read_text().split() == ["a", "b", "c"]  # skipped, not run again
    assert "3/3 done" in cli("status", "rm", "--no-color", runs=work / "runs").stdout


def test_a_removed_step_that_comes_back_changed_runs_again(work: Path) -> None:
    write(work / "resumable.toml", _job("a", "b"))
    assert run_cli([]).exit_code == 0
    write(work / "resumable.toml", _job("a"))
    assert run_cli([]).exit_code == 0
    write(work / "resumable.toml", _job("a") + '[steps.b]\nrun = "echo b2 >> trace"\n')
    r = run_cli([])
    assert r.exit_code == 0 and r.output.splitlines()[-1] == "rm: done (1 done, 1 skipped)"
    assert units(work, "rm")["b"]["removed"] is False
    assert (work / "trace").read_text().split() == ["a", "b", "b2"]
