"""The named statements of ``queries.sql``: one file to review for what the workers' path sends.

``queries.sql`` is a list of ``-- name --`` headers, each followed by comments saying why and the
statement itself; ``Q.name`` is that statement's text. A name that is not in the file is an
``AttributeError`` at first use, and every name is checked by the tests."""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Final

WORK = "resumable_work"  # NOTIFY channel: a step may have become claimable (payload: run id)
_HEADER = re.compile(r"^-- ([a-z_]+) --$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """``{name: statement}`` of a queries file (the comments before the first header are its preamble)."""
    parts = _HEADER.split(text)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in out:
            raise ValueError(f"queries.sql names {name} twice")
        statement = "\n".join(line for line in body.strip().splitlines() if not line.startswith("--")).strip()
        out[name] = statement.rstrip(";")
    return out


class _Queries:
    def __init__(self) -> None:
        self.__dict__.update(parse(files("resumable.store.postgres").joinpath("queries.sql").read_text("utf-8")))

    def __getattr__(self, name: str) -> str:
        raise AttributeError(f"queries.sql has no statement named {name}")


Q: Final = _Queries()
