"""A project's own phases and payload schemas (``--phases FILE``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledgerhelpers import cli

from resumable import ledger
from resumable.errors import InvalidInputError

PIPELINE = """
format = 1

[[phase]]
name = "build"
[phase.payload]
artifact = { type = "str", min_length = 1 }
sha = "sha"
tests = { type = "list[str]", default = [] }

[[phase]]
name = "deploy"
ordinal = 5
[phase.payload]
replicas = { type = "int", ge = 1, le = 9 }
canary = { type = "bool", default = false }
at = "datetime"
ratio = { type = "float", default = 0.5 }
"""


@pytest.fixture
def phases_file(tmp_path: Path) -> Path:
    path = tmp_path / "phases.toml"
    path.write_text(PIPELINE)
    return path


def test_a_declared_pipeline_end_to_end(phases_file: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ("--ticket-id", "PRJ-1", "--run-id", "r1", "--phases", str(phases_file))
    code, out, _ = cli(capsys, "write", *common, "--phase", "deploy", "--payload",
                       json.dumps({"replicas": 3, "at": "2026-01-01T12:00:00+01:00"}), base=base)
    data = json.loads(out)
    assert code == 0 and data["success"], data
    assert data["checkpoint_path"].endswith("/phase_5_deploy_a1.yaml")
    text = (base / data["checkpoint_path"]).read_text()
    assert text.endswith("phase_payload:\n  phase: deploy\n  replicas: 3\n  canary: false\n"
                         "  at: '2026-01-01T11:00:00Z'\n  ratio: 0.5\n")
    code, out, _ = cli(capsys, "read", *common, "--phase", "deploy", base=base)
    assert code == 0 and json.loads(out)["checkpoint"]["phase_payload"]["replicas"] == 3
    code, out, _ = cli(capsys, "resume-point", *common, base=base)
    assert json.loads(out)["resume_phase"] == "build"
    code, out, _ = cli(capsys, "write", *common, "--phase", "implement", base=base)
    assert json.loads(out)["error"] == "Invalid phase: implement. Valid: ['build', 'deploy']"


@pytest.mark.parametrize(("payload", "fragment"), [
    ({"replicas": 0, "at": "2026-01-01T12:00:00Z"}, ">= 1"),
    ({"replicas": 10, "at": "2026-01-01T12:00:00Z"}, "<= 9"),
    ({"replicas": "3", "at": "2026-01-01T12:00:00Z"}, "Expected `int`, got `str`"),
    ({"replicas": 3, "at": "2026-01-01T12:00:00"}, "at must be timezone-aware"),
    ({"replicas": 3}, "missing required field `at`"),
    ({"replicas": 3, "at": "2026-01-01T12:00:00Z", "extra": 1}, "unknown field `extra`"),
])
def test_declared_payloads_are_strict(phases_file: Path, base: Path, payload: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidInputError, match=None) as info:
        ledger.write("PRJ-1", "r1", "deploy", payload, base_dir=base, phases=str(phases_file))
    assert fragment in str(info.value)


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "declare at least one [[phase]] table"),
    ("format = 2\n[[phase]]\nname = 'a'\n", "newer than this resumable understands"),
    ("[[phase]]\nname = 'Bad-Name'\n", "Invalid phase name"),
    ("[[phase]]\nname = 'a'\n[[phase]]\nname = 'a'\n", "declared twice"),
    ("[[phase]]\nname = 'a'\nordinal = 2\n[[phase]]\nname = 'b'\nordinal = 2\n", "ordinal must be an integer above"),
    ("[[phase]]\nname = 'a'\n[phase.payload]\nx = 'decimal'\n", "type must be one of"),
    ("[[phase]]\nname = 'a'\n[phase.payload]\nx = { type = 'bool', ge = 1 }\n", "does not apply to type bool"),
    ("[[phase]]\nname = 'a'\n[phase.payload]\nphase = 'str'\n", "other than 'phase'"),
    ("[[phase]]\nname = 'a'\n[phase.payload]\nx = { type = 'sha', default = 'xyz' }\n", "is not a sha"),
    ("[[phase]]\nname = 'a'\ncolour = 'red'\n", "unknown key 'colour'"),
    ("this is = not toml", "is not valid TOML"),
])
def test_bad_phase_files_are_one_line_errors(tmp_path: Path, text: str, fragment: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidInputError) as info:
        ledger.load_phases(str(path))
    assert fragment in str(info.value) and "\n" not in str(info.value)
    code, out, err = cli(capsys, "list", "--ticket-id", "T", "--phases", str(path))
    assert code == 1 and json.loads(out)["success"] is False and err.count("\n") == 1


def test_the_default_phases_are_the_seeds() -> None:
    assert [(p.name, p.ordinal) for p in ledger.DEFAULT_PHASES.phases] == [
        ("implement", 1), ("local_review", 2), ("create_pr", 3), ("pr_release_ready", 4), ("ready_for_merge", 5)]


def _many_phases(path: Path, n: int) -> Path:
    path.write_text("format = 1\n" + "".join(f'[[phase]]\nname = "p{i}"\n[phase.payload]\na = "str"\n'
                                              for i in range(n)))
    return path


def _lines_executed(fn: object) -> int:
    """How many lines of resumable's own code ``fn()`` executes: a measure of work that does not
    depend on the machine's speed (the standard library's lines, tomllib's, are not counted)."""
    import sys
    from types import FrameType

    count = 0

    def local(frame: FrameType, event: str, arg: object) -> object:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def on_call(frame: FrameType, event: str, arg: object) -> object:
        return local if "/resumable/" in frame.f_code.co_filename else None

    sys.settrace(on_call)  # type: ignore[arg-type]
    try:
        fn()  # type: ignore[operator]
    finally:
        sys.settrace(None)
    return count


def test_the_work_of_a_write_grows_linearly_with_the_phases_declared(tmp_path: Path) -> None:
    """A 20,000-phase file made each write take 11.6 s: each phase was checked against every
    earlier one for duplicates, and every look-up scanned the list. Twice the phases must cost at
    most about twice the work (a quadratic cost would be four times)."""
    work = {}
    for n in (300, 600):
        path = _many_phases(tmp_path / f"p{n}.toml", n)

        def write_and_resume(path: Path = path, n: int = n) -> None:
            ledger.write("T", "r", f"p{n - 1}", {"a": "x"}, base_dir=tmp_path / "ck", phases=str(path))
            ledger.resume_point("T", "r", base_dir=tmp_path / "ck", phases=str(path))
            ledger.stored_runs("T", base_dir=tmp_path / "ck", phases=str(path))

        work[n] = _lines_executed(write_and_resume)
    assert work[600] < 2.5 * work[300], work


def test_a_phase_declared_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.toml"
    path.write_text('[[phase]]\nname = "a"\n[[phase]]\nname = "b"\n[[phase]]\nname = "a"\n')
    with pytest.raises(InvalidInputError, match="phase 'a' is declared twice"):
        ledger.load_phases(str(path))
