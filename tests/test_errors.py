"""The one error policy: every error class has its exit code in one table, and whatever reaches a
command, ours or foreign, ends as one line on stderr and that code, never a traceback."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import click
import pytest

from resumable import errors
from resumable.cli import lowlevel
from resumable.cli.main import main
from resumable.view import discovery


def all_error_classes() -> list[type[errors.ResumableError]]:
    found: list[type[errors.ResumableError]] = []
    todo: list[type[errors.ResumableError]] = [errors.ResumableError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_its_exit_code_in_the_table() -> None:
    classes = all_error_classes()
    assert len(classes) >= 10
    for cls in classes:
        if cls.__module__ == "resumable.errors":
            assert cls in errors.EXIT_CODES, f"{cls.__name__} is missing from EXIT_CODES"
            assert cls("x").exit_code == errors.exit_code_of(cls)
        else:  # defined elsewhere (a subpackage, a test): takes its nearest listed base's code
            assert errors.exit_code_of(cls) in set(errors.EXIT_CODES.values())
    assert errors.RefusedError("x").exit_code == 2 and errors.NoRunError("x").exit_code == 3
    assert errors.Interrupted("x").exit_code == 130 and errors.NewerFormatError("x").exit_code == 1


def test_a_message_is_always_one_line() -> None:
    assert str(errors.StoreError("a\nb\nc")) == "a b c"


FOREIGN: list[tuple[BaseException, int, str]] = [
    (errors.RefusedError("refused\nhere"), 2, "refused here"),
    (errors.NoRunError("nothing"), 3, "nothing"),
    (OSError(errno.EIO, "Input/output error", "/x/y"), 1, "Input/output error: /x/y"),
    (PermissionError(errno.EACCES, "Permission denied"), 1, "Permission denied"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (ValueError("boom\nsecond line"), 1, "internal error (ValueError: boom second line)"),
    (RuntimeError("\x1b]0;pwned\x07"), 1, "\\x1b]0;pwned\\x07"),
    (click.UsageError("bad usage"), 1, "bad usage"),
    (click.exceptions.Abort(), 130, "interrupted"),
]


def check_one_line(capsys: pytest.CaptureFixture[str], code: int, expected_code: int, fragment: str) -> None:
    out = capsys.readouterr()
    assert code == expected_code, out
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("resumable: "), out.err
    assert fragment in lines[0] and "Traceback" not in out.err
    assert "\x1b" not in out.err and "\x07" not in out.err


@pytest.mark.parametrize(("exc", "expected", "fragment"), FOREIGN)
def test_anything_reaching_a_seed_verb_is_one_line(
    exc: BaseException, expected: int, fragment: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(args: lowlevel.Args) -> None:
        raise exc

    monkeypatch.setitem(lowlevel.HANDLERS, "get", boom)
    check_one_line(capsys, main(["get", "r"]), expected, fragment)


@pytest.mark.parametrize(("exc", "expected", "fragment"), FOREIGN)
def test_anything_reaching_a_click_command_is_one_line(
    exc: BaseException, expected: int, fragment: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    def boom(*_: object) -> None:
        raise exc

    raising: Callable[..., None] = boom
    monkeypatch.setattr(discovery, "pick_run", raising)
    for command in (["status", "r"], ["report", "r"], ["log", "r"]):
        check_one_line(capsys, main([*command, "--dir", str(tmp_path)]), expected, fragment)


def test_a_broken_pipe_is_silent(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(args: lowlevel.Args) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setitem(lowlevel.HANDLERS, "get", boom)
    assert main(["get", "r"]) == 1
    assert capsys.readouterr().err == ""


def test_usage_errors_of_click_commands_are_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["status", "--no-such-flag"], ["run", "--jobs", "minus"], ["log", "--since"], ["report", "-o"]):
        code = main(argv)
        out = capsys.readouterr()
        assert code == 1, (argv, out)
        assert len(out.err.splitlines()) == 1 and out.err.startswith("resumable: "), (argv, out.err)


def test_no_arguments_prints_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("resumable: usage: resumable <init|") and err.count("\n") == 1
