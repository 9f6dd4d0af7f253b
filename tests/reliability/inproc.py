"""Run the `resumable` command line in this process (``resumable.cli.main.main``), with its own
stdout, stderr, environment and working directory, the way the installed script runs it, minus
the interpreter start-up: a call costs milliseconds, so the fuzz suite can make thousands."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass
class Called:
    code: int
    out: bytes
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()


class _Stream(io.TextIOWrapper):
    """A text stream over bytes, like a pipe's sys.stdout (``.buffer`` for raw writes)."""

    def __init__(self, errors: str = "strict") -> None:
        # As a real process's streams on a pipe: stdout strict, stderr backslashreplace.
        super().__init__(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)

    def isatty(self) -> bool:
        return False

    def value(self) -> bytes:
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return raw.getvalue()


@contextlib.contextmanager
def environment(env: Mapping[str, str], cwd: str | None = None) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ULPI_")) and k != "NO_COLOR"}
    env.update(extra)
    return env


def call(argv: list[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Called:
    """``resumable <argv>`` in this process; its exit code, stdout bytes and stderr text."""
    from resumable.cli.main import main

    out, err = _Stream(), _Stream("backslashreplace")
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr = out, err
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    try:
        with environment(clean_env() if env is None else env, cwd):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # a command that exits on its own (click's ctx.exit)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
    return Called(code, out.value(), err.value().decode("utf-8", "replace"))
