from __future__ import annotations

from pathlib import Path

import pytest

from resumable.errors import InvalidInputError, UsageError
from resumable.runner.jobfile import job_from_flags, load_job_file, parse_duration


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
