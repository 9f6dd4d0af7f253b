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
