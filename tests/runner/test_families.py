"""Families of steps in a job file (runner.families, runner.expand, runner.templates): what they
expand to, how values are put into commands, and every mistake refused with its file and line."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from runnerhelpers import run_cli, units, write

from resumable.runner.jobfile import load_job_file
from resumable.runner.joblocate import JobFileError
from resumable.runner.templates import BARE, DOUBLE, SINGLE, compile_text, put


def _job(tmp_path: Path, body: str) -> Path:
    return write(tmp_path / "resumable.toml", '[job]\nname = "f"\n' + body)


def _ids(tmp_path: Path, body: str) -> list[str]:
    return [s.id for s in load_job_file(_job(tmp_path, body)).steps]


def _problems(tmp_path: Path, body: str) -> list[str]:
    p = _job(tmp_path, body)
    with pytest.raises(JobFileError) as e:
        load_job_file(p)
    return [x.replace(f"{p}:", "L") for x in e.value.problems]


def test_a_list_a_range_and_their_product(tmp_path: Path) -> None:
    assert _ids(tmp_path, '[steps.a]\nparams = { x = ["p", "q"] }\nrun = "echo {x}"\n') == ["a+p", "a+q"]
    assert _ids(tmp_path, '[steps.a]\nparams = { n = { from = 1, to = 3 } }\nrun = "echo {n}"\n') == \
        ["a+1", "a+2", "a+3"]
    assert _ids(tmp_path, '[steps.a]\nparams = { n = { from = 8, to = 12, step = 2, width = 3 } }\nrun = "x"\n') == \
        ["a+008", "a+010", "a+012"]
    assert _ids(tmp_path, '[steps.a]\nparams = { n = { from = 3, to = 1, step = -1 } }\nrun = "x"\n') == \
        ["a+3", "a+2", "a+1"]
    # A matrix: the product, the first parameter outermost, values as the TOML writes them.
    assert _ids(tmp_path, '[steps.t]\nparams = { lr = [0.1, 0.01], seed = [1, 2] }\nrun = "x {lr} {seed}"\n') == \
        ["t+0.1+1", "t+0.1+2", "t+0.01+1", "t+0.01+2"]


def test_exclude_and_include_as_ci_matrices(tmp_path: Path) -> None:
    body = ('[steps.t]\nparams = { os = ["linux", "mac"], py = ["3.11", "3.12"] }\nrun = "x"\n'
            'exclude = [{ os = "mac", py = "3.11" }]\n'
            'include = [{ os = "bsd", py = "3.12" }, { os = "linux", py = "3.11" }]\n')
    assert _ids(tmp_path, body) == ["t+linux+3.11", "t+linux+3.12", "t+mac+3.12", "t+bsd+3.12"]
    # An exclusion names a subset of the parameters, or several values of one.
    body = '[steps.t]\nparams = { a = [1, 2, 3], b = [1, 2] }\nrun = "x"\nexclude = [{ a = [1, 3] }]\n'
    assert _ids(tmp_path, body) == ["t+2+1", "t+2+2"]


def test_values_are_put_into_every_field(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("a")
    (tmp_path / "work-a").mkdir()
    job = load_job_file(_job(tmp_path, """[steps.s]
params = { x = ["a"] }
run = ["cp", "../in/{x}.txt", "{x}.out"]
inputs = ["../in/{x}.txt"]
artifacts = ["{x}.out"]
env = { WHICH = "value-{x}", PLAIN = "1" }
cwd = "work-{x}"
log = "logs/{x}.log"
"""))
    (s,) = job.steps
    assert s.id == "s+a" and s.command == ("cp", "../in/a.txt", "a.out")
    assert s.inputs == ("../in/a.txt",) and s.artifacts == ("a.out",)
    assert dict(s.env) == {"WHICH": "value-a", "PLAIN": "1"}
    assert s.cwd == str(tmp_path / "work-a") and s.log == str(tmp_path / "work-a" / "logs" / "a.log")


def test_braces_that_are_not_parameters_are_the_shells(tmp_path: Path) -> None:
    (s,) = load_job_file(_job(tmp_path, """[steps.s]
params = { x = ["a"] }
run = "awk '{print $1}' f | echo ${HOME} {{x}} {x}"
""")).steps
    assert s.command == "awk '{print $1}' f | echo ${HOME} {x} a"
    # An ordinary step's braces are left alone, as they always were.
    (o,) = load_job_file(_job(tmp_path, '[steps.o]\nrun = "echo {x} {{y}}"\n')).steps
    assert o.command == "echo {x} {{y}}"


@pytest.mark.parametrize("value", ["two words", "it's", 'say "hi"', "$HOME `id` \\n", "a'b\"c d", "-n", "*"])
def test_a_value_arrives_as_one_argument_whatever_it_holds(work: Path, value: str) -> None:
    """Bare, inside '...' and inside "...": each place quotes the value its own way."""
    write(work / "argv.py", "import sys, json; print(json.dumps(sys.argv[1:]))\n")
    values = shlex.quote(value)
    write(work / "resumable.toml", f"""[job]
name = "q"
[steps.s]
params = {{ v = [{_toml(value)}] }}
run = "python3 argv.py {{v}} '[{{v}}]' \\"<{{v}}>\\" > out.json"
""")
    r = run_cli(["-q"])
    assert r.exit_code == 0, (values, r.output)
    import json

    assert json.loads((work / "out.json").read_text()) == [value, f"[{value}]", f"<{value}>"]


def _toml(value: str) -> str:
    import json

    return json.dumps(value)  # a JSON string is a TOML basic string


def test_quoting_by_place() -> None:
    assert put("a b", BARE) == "'a b'" and put("it's", SINGLE) == "it'\\''s"
    assert put('$x "y"', DOUBLE) == '\\$x \\"y\\"' and put("plain-1.0", BARE) == "plain-1.0"
    t = compile_text("""a {x} 'b {x}' "c {x}" \\'{x}""", ["x"], shell=True)
    assert [getattr(p, "context", None) for p in t.pieces if not isinstance(p, str)] == [BARE, SINGLE, DOUBLE, BARE]


def test_an_id_keeps_a_safe_alphabet_and_the_command_the_value(tmp_path: Path) -> None:
    (s,) = load_job_file(_job(tmp_path, '[steps.c]\nparams = { city = ["New York"] }\nrun = "echo {city}"\n')).steps
    assert s.id == "c+New_York" and s.command == "echo 'New York'"


def test_needs_one_to_one_fan_in_and_subsets(tmp_path: Path) -> None:
    job = load_job_file(_job(tmp_path, """[steps.a]
params = { shard = ["1", "2"] }
run = "x"
artifacts = ["a{shard}"]
[steps.b]
params = { shard = ["1", "2"], seed = ["x", "y"] }
needs = ["a"]
run = "x"
[steps.all]
needs = ["b"]
run = "cat {a.artifacts}"
[steps.some]
needs = [{ step = "b", seed = "y" }, "a+1"]
run = "x"
[steps.other]
params = { id = ["1"] }
needs = [{ step = "a", shard = "{id}" }, { step = "b", shard = ["2"], seed = "x" }]
run = "x"
"""))
    needs = {s.id: s.needs for s in job.steps}
    assert needs["b+1+x"] == ("a+1",) and needs["b+2+y"] == ("a+2",)
    assert needs["all"] == ("b+1+x", "b+1+y", "b+2+x", "b+2+y", "a+1", "a+2")  # {a.artifacts} needs every a
    assert needs["some"] == ("b+1+y", "b+2+y", "a+1")
    assert needs["other+1"] == ("a+1", "b+2+x")
    assert job.step("all").command == "cat a1 a2"


def test_fan_in_names_every_artifact_where_the_step_stands(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    job = load_job_file(_job(tmp_path, """[steps.f]
params = { n = [1, 2] }
run = "x"
artifacts = ["out/{n}.csv", "out/{n} b.txt"]
[steps.merge]
run = ["merge", "{f.artifacts}", "-o", "all"]
inputs = ["{f.artifacts}"]
env = { FILES = "{f.artifacts}" }
cwd = "sub"
[steps.shell]
run = "merge {f.artifacts} > all"
"""))
    merge = job.step("merge")
    assert merge.command == ("merge", "../out/1.csv", "../out/1 b.txt", "../out/2.csv", "../out/2 b.txt", "-o", "all")
    assert merge.inputs == ("../out/1.csv", "../out/1 b.txt", "../out/2.csv", "../out/2 b.txt")
    assert dict(merge.env)["FILES"] == "../out/1.csv ../out/1 b.txt ../out/2.csv ../out/2 b.txt"
    assert job.step("shell").command == "merge out/1.csv 'out/1 b.txt' out/2.csv 'out/2 b.txt' > all"
    assert job.step("merge").needs == ("f+1", "f+2")


def test_files_matched_by_a_pattern_with_named_parts(tmp_path: Path) -> None:
    for rel in ("raw/eu/01.csv", "raw/eu/02.csv", "raw/us/01.csv", "raw/us/notes.txt", "raw/.hidden.csv",
                "raw/eu/.x.csv"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "raw" / "us" / "dir.csv").mkdir()  # a directory is not a file
    job = load_job_file(_job(tmp_path, '[steps.c]\nfiles = "raw/{region}/{shard}.csv"\nrun = "x {region} {shard}"\n'
                                       'inputs = ["raw/{region}/{shard}.csv"]\n'))
    assert [s.id for s in job.steps] == ["c+eu+01", "c+eu+02", "c+us+01"]
    assert sorted(p for p, _ in job.scanned) == [str(tmp_path / "raw"), str(tmp_path / "raw" / "eu"),
                                                  str(tmp_path / "raw" / "us")]
    # With params too: their product.
    job = load_job_file(_job(tmp_path, '[steps.c]\nfiles = "raw/eu/{shard}.csv"\nparams = { k = [1, 2] }\nrun = "x"\n'))
    assert [s.id for s in job.steps] == ["c+01+1", "c+01+2", "c+02+1", "c+02+2"]


def test_every_mistake_in_one_pass_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    problems = _problems(tmp_path, """[steps.a]
params = { shard = ["1", "2"] }
run = "echo {shrad}"
artifacts = ["same.txt"]
[steps.b]
params = { model = ["m"] }
needs = ["a"]
run = "x"
[steps.c]
params = { x = [] }
run = "x"
[steps.d]
files = "raw/{id}.csv"
run = "x"
[steps.e]
needs = [{ step = "a", shard = "9" }, { step = "a", shrad = "1" }]
run = "x"
[steps.g]
params = { k = { from = 5, to = 1 } }
run = "x"
[steps.h]
params = { v = ["a b", "a_b"] }
run = "x"
[steps.i]
params = { v = [1, 2] }
exclude = [{ v = [1, 2] }]
run = "x"
[steps.j]
params = { v = [1] }
exclude = [{ w = 1 }]
include = [{ v = 1, extra = 2 }]
run = "x"
""")
    assert problems == [
        "L5: [steps.a] run: unknown parameter {shrad} (did you mean 'shard'?); the step's parameters: shard "
        "(write {{ and }} for literal braces)",
        "L6: [steps.a] artifacts: a+1 and a+2 both make 'same.txt': give each instance its own artifact (use its"
        " parameters in the path)",
        "L9: [steps.b] needs: 'b' (model) and 'a' (shard) share no parameter, so their instances cannot be "
        'matched: need every instance with { step = "a" }, or name the values, like { step = "a", shard = "{model}" }',
        "L12: [steps.c] params: x: an empty list makes no step",
        "L15: [steps.d] files: no file matches 'raw/{id}.csv' (in " + str(tmp_path) + "): the family makes no step",
        "L18: [steps.e] needs: e needs a with shard = '9', which has no such instance",
        "L18: [steps.e] needs: { step = 'a' }: unknown parameter 'shrad' (did you mean 'shard'?);"
        " a's parameters: shard",
        "L21: [steps.g] params: k: the range from 5 to 1 by 1 is empty: no step",
        "L24: [steps.h] params: v: two values make the same instance id part 'a_b'",
        "L28: [steps.i] exclude: every combination is excluded: the family makes no step",
        "L32: [steps.j] exclude: unknown parameter 'w'; the step's parameters: v",
        "L33: [steps.j] include: unknown parameter 'extra'; the step's parameters: v",
    ]


def test_two_instances_with_the_same_artifact_or_id(tmp_path: Path) -> None:
    assert _problems(tmp_path, '[steps.a]\nparams = { s = [1, 2] }\nrun = "x"\nartifacts = ["out.csv"]\n') == [
        "L6: [steps.a] artifacts: a+1 and a+2 both make 'out.csv': give each instance its own artifact (use its"
        " parameters in the path)"]
    assert _problems(tmp_path, '[steps.a]\nparams = { s = ["a b"] }\ninclude = [{ s = "a_b" }]\nrun = "x"\n') == [
        "L4: [steps.a] params: two instances have the id 'a+a_b': s='a b' and s='a_b'"]


def test_other_refusals(tmp_path: Path) -> None:
    assert _problems(tmp_path, '[steps.a]\nexclude = [{ v = 1 }]\nrun = "x"\n') == [
        "L4: [steps.a] exclude: exclude goes with params or files (a family of steps)"]
    assert _problems(tmp_path, '[steps.a]\nparams = { v = [1] }\nrun = "x"\n[steps.b]\nrun = "cat {a.artifacts}"\n') \
        == ["L7: [steps.b] run: {a.artifacts}: a declares no artifacts"]
    assert _problems(tmp_path, '[steps.b]\nrun = "cat {nope.artifacts}"\n') == [
        "L4: [steps.b] run: {nope.artifacts}: no step or family 'nope'"]
    assert _problems(tmp_path, '[steps.a]\nparams = { v = [1] }\nrun = "x"\nneeds = ["a"]\n') == [
        "L6: [steps.a] needs: a step cannot need itself"]
    assert _problems(tmp_path, '[steps.a]\nparams = { v = [1] }\nrun = "x"\n[steps.b]\nrun = "x"\nneeds = ["a+2"]\n') \
        == ["L8: [steps.b] needs: unknown step 'a+2' in needs (did you mean 'a+1'?)"]
    assert _problems(tmp_path, '[steps.a]\nparams = { step = [1], "bad name" = [2] }\nrun = "x"\n') == [
        "L4: [steps.a] params: bad parameter name 'step': use letters, digits and '_' (not 'step')",
        "L4: [steps.a] params: bad parameter name 'bad name': use letters, digits and '_' (not 'step')"]
    assert _problems(tmp_path, '[steps.a]\nparams = { n = { from = 1, to = 2000000 } }\nrun = "x"\n') == [
        "L4: [steps.a] params: n: 2,000,000 values; the limit is 1,000,000 per family"]
    assert _problems(tmp_path, '[steps.a]\nfiles = "raw/*.csv"\nrun = "x"\n') == [
        "L4: [steps.a] files: 'raw/*.csv' has no {name} part: write one, like raw/{shard}.csv"]


def test_the_cli_reports_them_one_per_line(work: Path) -> None:
    write(work / "resumable.toml", '[steps.a]\nparams = { s = [] }\nrun = "x"\n[steps.b]\nneeds = ["c"]\nrun = "x"\n')
    r = run_cli([])
    assert r.exit_code == 1
    assert "resumable.toml:2: [steps.a] params: s: an empty list makes no step" in r.output
    assert "resumable.toml:5: [steps.b] needs: unknown step 'c' in needs" in r.output
    assert not (work / "runs").exists()  # nothing written


def test_a_family_runs_each_instance_as_a_step_of_its_own(work: Path) -> None:
    write(work / "resumable.toml", """[job]
name = "each"
[steps.sq]
params = { n = { from = 1, to = 3 } }
run = "mkdir -p out && echo $(({n} * {n})) > out/{n}.txt"
artifacts = ["out/{n}.txt"]
[steps.sum]
run = "cat {sq.artifacts} | paste -sd+ | bc > total.txt || awk '{{s+=$1}} END {{print s}}' {sq.artifacts} > total.txt"
needs = ["sq"]
artifacts = ["total.txt"]
""")
    r = run_cli(["-j", "2"])
    assert r.exit_code == 0, r.output
    u = units(work, "each")
    assert sorted(u) == ["sq+1", "sq+2", "sq+3", "sum"]
    assert all(x["status"] == "done" for x in u.values())
    assert u["sq+2"]["attempts"][0]["log"].endswith("sq+2.1.log")
    assert (work / "total.txt").read_text().strip() == "14"


HOSTILE = [
    'params = 5\nrun = "x"', 'params = { x = 5 }\nrun = "x"', 'params = { x = [[1]] }\nrun = "x"',
    'params = { x = [true] }\nrun = "x"', 'params = { x = { from = "a", to = 3 } }\nrun = "x"',
    'params = { x = { from = 1, to = 3, step = 0 } }\nrun = "x"', 'params = { x = { from = 1 } }\nrun = "x"',
    'files = 5\nrun = "x"', 'files = ""\nrun = "x"', 'files = "{x}/{y"\nrun = "x"', 'files = "../{x}/.."\nrun = "x"',
    'params = { x = [1] }\ncwd = 5\nfiles = "r/{y}"\nrun = "x"', 'params = { x = [1] }\nexclude = 5\nrun = "x"',
    'params = { x = [1] }\nexclude = [5]\nrun = "x"', 'params = { x = [1] }\ninclude = [{ x = [1, 2] }]\nrun = "x"',
    'params = { x = [1] }\nneeds = 5\nrun = "x"', 'params = { x = [1] }\nneeds = [5]\nrun = "x"',
    'params = { x = [1] }\nneeds = [{ step = 5 }]\nrun = "x"',
    'params = { x = [1] }\nneeds = [{ nostep = "b" }]\nrun = "x"',
    'params = { x = [1] }\nrun = 5', 'params = { x = [1] }', 'params = { x = ["a\\u0000b"] }\nrun = "x"',
    'params = { x = [1] }\nrun = "{x}"\nartifacts = ["{a.artifacts}"]', 'run = "x"\nneeds = [{ step = "a" }]',
    'params = { x = [1] }\nrun = "x"\nlog = 7', 'params = { x = [1] }\nrun = "{x.artifacts}"',
]


@pytest.mark.parametrize("body", HOSTILE)
def test_a_bad_family_is_one_line_a_problem_never_a_traceback(tmp_path: Path, body: str) -> None:
    p = _job(tmp_path, "[steps.a]\n" + body + "\n")
    with pytest.raises(JobFileError) as e:
        load_job_file(p)
    assert all(line.startswith(f"{p}") and "\n" not in line for line in e.value.problems)
