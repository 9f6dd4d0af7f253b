from __future__ import annotations

from pathlib import Path

import pytest

from resumable.errors import InvalidInputError, UsageError
from resumable.runner.jobfile import load_job_file, parse_duration
from resumable.runner.jobflags import job_from_flags
from resumable.runner.joblocate import MAX_PROBLEMS, JobFileError


@pytest.mark.parametrize(("value", "seconds"), [
    (90, 90.0), (1.5, 1.5), ("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("2h", 7200.0),
    ("250ms", 0.25), (" 3 s ", 3.0),
])
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value, "x") == seconds


@pytest.mark.parametrize("value", ["ten", "5d", -1, True, "", [1], "1.2.3s"])
def test_bad_durations(value: object) -> None:
    with pytest.raises(InvalidInputError, match="x"):
        parse_duration(value, "x")


def _job(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "resumable.toml"
    p.write_text(text)
    return p


def test_full_job(tmp_path: Path) -> None:
    p = _job(tmp_path, """
[job]
name = "j"
timeout = "10m"
retries = 2
env = { A = "1" }
shell = ["bash", "-euo", "pipefail", "-c"]

[steps.fetch]
run = "curl x"
artifacts = ["out.bin"]

[steps.build]
run = ["make", "all"]
needs = ["fetch"]
timeout = 90
retries = 0
env = { B = 2 }
cwd = "sub"
inputs = ["src.c"]
""")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "src.c").write_text("int x;\n")
    job = load_job_file(p)
    fetch, build = job.steps
    assert job.name == "j"
    assert fetch.timeout == 600 and fetch.retries == 2 and fetch.artifacts == ("out.bin",)
    assert fetch.argv == ["bash", "-euo", "pipefail", "-c", "curl x"]
    assert build.argv == ["make", "all"] and build.needs == ("fetch",)
    assert build.timeout == 90 and build.retries == 0
    assert dict(build.env) == {"A": "1", "B": "2"}
    assert build.cwd == str(tmp_path / "sub")


def test_unknown_key_names_file_line_and_key(tmp_path: Path) -> None:
    p = _job(tmp_path, '[job]\nname = "j"\n\n[steps.a]\nrun = "x"\ntimeuot = 5\n')
    with pytest.raises(InvalidInputError) as e:
        load_job_file(p)
    assert f"{p}:6" in str(e.value) and "timeuot" in str(e.value)


def test_unknown_job_key(tmp_path: Path) -> None:
    p = _job(tmp_path, '[job]\nname = "j"\nretry = 1\n[steps.a]\nrun = "x"\n')
    with pytest.raises(InvalidInputError, match=r":3: \[job\] retry"):
        load_job_file(p)


def test_unknown_needs(tmp_path: Path) -> None:
    p = _job(tmp_path, '[job]\nname = "j"\n[steps.a]\nrun = "x"\nneeds = ["zz"]\n')
    with pytest.raises(InvalidInputError, match=r":5: \[steps.a\] needs: unknown step 'zz'"):
        load_job_file(p)


def test_cycle(tmp_path: Path) -> None:
    p = _job(tmp_path, '[job]\nname = "j"\n[steps.a]\nrun = "x"\nneeds = ["b"]\n'
                       '[steps.b]\nrun = "y"\nneeds = ["a"]\n')
    with pytest.raises(InvalidInputError, match="dependency cycle: a -> b -> a"):
        load_job_file(p)


@pytest.mark.parametrize(("body", "needle"), [
    ('run = 5', "run"),
    ('run = "x"\nretries = -1', "retries"),
    ('run = "x"\ntimeout = "soon"', "timeout"),
    ('run = "x"\nenv = { "bad-name" = "1" }', "env"),
    ('run = "x"\njitter = 3', "jitter"),
    ('run = "x"\nneeds = [1]', "needs"),
])
def test_bad_values(tmp_path: Path, body: str, needle: str) -> None:
    p = _job(tmp_path, f'[job]\nname = "j"\n[steps.a]\n{body}\n')
    with pytest.raises(InvalidInputError, match=needle):
        load_job_file(p)


def test_bad_step_id_and_toml(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="bad step id"):
        load_job_file(_job(tmp_path, '[job]\nname = "j"\n[steps."../x"]\nrun = "x"\n'))
    with pytest.raises(InvalidInputError, match="not valid TOML"):
        load_job_file(_job(tmp_path, "[job\n"))
    with pytest.raises(UsageError, match="no job file"):
        load_job_file(tmp_path / "missing.toml")


def test_flags_split_at_first_colon(tmp_path: Path) -> None:
    job = job_from_flags("j", ["a:echo a:b", "b:x"], step_timeouts=["a:5"],
                         step_artifacts=["a:o1", "a:o2"], cwd=str(tmp_path))
    a, b = job.steps
    assert a.command == "echo a:b" and a.timeout == 5 and a.artifacts == ("o1", "o2")
    assert b.needs == () and b.timeout is None


@pytest.mark.parametrize("specs", [[":x"], ["a:"], ["a"], ["a:x", "a:y"]])
def test_flags_bad(specs: list[str]) -> None:
    with pytest.raises((UsageError, InvalidInputError)):
        job_from_flags("j", specs)


def test_flags_per_step_unknown_id() -> None:
    with pytest.raises(UsageError, match="no --step with id 'zz'"):
        job_from_flags("j", ["a:x"], step_timeouts=["zz:5"])


def test_name_defaults_to_file_stem_or_directory(tmp_path: Path) -> None:
    (tmp_path / "nightly.toml").write_text('[steps.a]\nrun = "x"\n')
    assert load_job_file(tmp_path / "nightly.toml").name == "nightly"
    proj = tmp_path / "my-project"
    proj.mkdir()
    (proj / "resumable.toml").write_text('[steps.a]\nrun = "x"\n')
    assert load_job_file(proj / "resumable.toml").name == "my-project"
    assert load_job_file(proj / "resumable.toml", name_override="other").name == "other"


def test_bad_job_name_is_called_a_job_name(tmp_path: Path) -> None:
    p = _job(tmp_path, '[job]\nname = "nightly build"\n[steps.a]\nrun = "x"\n')
    with pytest.raises(InvalidInputError) as e:
        load_job_file(p)
    assert str(e.value).startswith(f"{p}:2: [job] name: bad job name 'nightly build'")
    (tmp_path / "my job.toml").write_text('[steps.a]\nrun = "x"\n')
    with pytest.raises(InvalidInputError, match=r"no \[job\] name, .* bad job name 'my job'.*--job NAME"):
        load_job_file(tmp_path / "my job.toml")
    with pytest.raises(InvalidInputError, match=r"--job: bad job name 'a\.\.b'"):
        load_job_file(p, name_override="a..b")


def test_every_problem_in_one_pass_with_its_line(tmp_path: Path) -> None:
    p = _job(tmp_path, """[job]
retry = 1
[steps.a]
run = "x"
timeuot = 5
[steps.b]
run = 5
needs = ["zz"]
[steps.c]
retries = -1
[steps.combine]
run = "x"
[steps.d]
run = "x"
needs = ["combin"]
inputs = ["data/typo.csv", "data/*.csv"]
""")
    with pytest.raises(JobFileError) as e:
        load_job_file(p)
    assert e.value.problems == [
        f"{p}:2: [job] retry: unknown key 'retry' (did you mean 'retries'?); known: backoff, cwd, env, grace,"
        " jitter, name, reconcile, retries, shell, timeout",
        f"{p}:5: [steps.a] timeuot: unknown key 'timeuot' (did you mean 'timeout'?); known: artifacts, backoff,"
        " cwd, env, exclude, files, grace, include, inputs, jitter, log, needs, params, retries, run, shell,"
        " timeout",
        f"{p}:7: [steps.b] run: expected a command string or a non-empty list of strings",
        f"{p}:8: [steps.b] needs: unknown step 'zz' in needs",
        f"{p}:9: [steps.c]: missing run = \"command\" (or a list for argv)",
        f"{p}:10: [steps.c] retries: expected an integer >= 0, got -1",
        f"{p}:15: [steps.d] needs: unknown step 'combin' in needs (did you mean 'combine'?)",
        f"{p}:16: [steps.d] inputs: input not found: 'data/typo.csv', 'data/*.csv' (no such file or"
        " directory, and no step declares it as an artifact)",
    ]
    assert str(e.value).startswith(f"{p}: 8 problems: {p}:2: [job] retry")


def test_problems_are_capped(tmp_path: Path) -> None:
    body = "".join(f'[steps.s{i}]\nrun = 1\n' for i in range(MAX_PROBLEMS + 5))
    with pytest.raises(JobFileError) as e:
        load_job_file(_job(tmp_path, body))
    assert len(e.value.problems) == MAX_PROBLEMS and e.value.count == MAX_PROBLEMS + 5
    assert e.value.problems[-1].startswith(f"{tmp_path / 'resumable.toml'}:{2 * MAX_PROBLEMS}: ")
    assert "(the first 20 shown)" in e.value.summary()


def test_dotted_keys_and_quoted_tables_are_located(tmp_path: Path) -> None:
    p = _job(tmp_path, '[steps]\na.run = "x"\na.timeout = "soon"\n[steps."b"]\nrun = "y"\nbad = 1\n')
    with pytest.raises(JobFileError) as e:
        load_job_file(p)
    assert [x.split(": ", 1)[0] for x in e.value.problems] == [f"{p}:3", f"{p}:6"]


def _many(n: int) -> str:
    return "".join(f'[steps.s{i}]\nrun = ["touch", "out/s{i}"]\n' for i in range(n))


def test_large_file_reads_as_a_whole_parse(tmp_path: Path) -> None:
    # Big enough to be parsed a piece at a time: the same steps, in the same order, as one parse.
    body = _many(30000)
    job = load_job_file(_job(tmp_path, '[job]\nname = "big"\nretries = 2\n' + body))
    assert [s.id for s in job.steps] == [f"s{i}" for i in range(30000)]
    assert job.steps[29999].command == ("touch", "out/s29999") and job.steps[29999].retries == 2
    assert job.steps[0].command[0] is job.steps[29999].command[0]  # one "touch" for every step


@pytest.mark.parametrize("tail, needle", [
    ('[steps.s5]\nrun = "again"\n', "not valid TOML"),  # a step defined twice, pieces apart
    ('[job]\nname = "late"\n', "not valid TOML"),  # [job] defined twice, the second far down
    ('[steps.s7.extra]\nx = 1\n', r"toml:17: \[steps.s7\] extra: unknown key 'extra'"),
])
def test_large_file_problems_are_the_whole_parses(tmp_path: Path, tail: str, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        load_job_file(_job(tmp_path, '[job]\nname = "big"\n' + _many(30000) + tail))


def test_large_file_with_inline_steps_is_refused(tmp_path: Path) -> None:
    text = 'steps = { a = { run = "x" } }\n' + _many(30000)
    with pytest.raises(InvalidInputError, match="not valid TOML"):
        load_job_file(_job(tmp_path, text))
