"""One store under test, either kind, behind the same few calls, so that one test function checks the
same contract against a runs directory and a PostgreSQL database."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from pgtests import base_env, cli, db_state, sql

STORES = ["files", "postgres"]
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


class StoreCase:
    def __init__(self, kind: str, tmp_path: Path, url: str | None) -> None:
        self.kind = kind
        self.tmp = tmp_path
        self.url = url
        self.runs = tmp_path / "runs"
        state = tmp_path / "state"
        if kind == "files":
            self.env = base_env(RESUMABLE_DIR=str(self.runs), XDG_STATE_HOME=str(state))
            self.root = str(self.runs)
        else:
            assert url is not None
            self.env = base_env(RESUMABLE_STORE=url, XDG_STATE_HOME=str(state))
            self.root = url
            clean(url)

    def r(self, *args: str | bytes, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return cli(*args, env=self.env, cwd=cwd or self.tmp, timeout=timeout)

    def state(self) -> Any:
        """Everything the store holds (compared before and after a command that must change nothing)."""
        if self.kind == "files":
            if not self.runs.exists():
                return {}
            return {str(p.relative_to(self.runs)): p.read_bytes() for p in sorted(self.runs.rglob("*"))
                    if p.is_file()}
        assert self.url is not None
        return db_state(self.url)

    def normal(self, text: str) -> str:
        """Output with what differs between stores by design masked: stamps, where runs live."""
        text = _STAMP.sub("<T>", text)
        text = text.replace(f"{self.root}#", "<root>/").replace(str(self.runs) + "/", "<root>/")
        text = text.replace(self.root, "<root>").replace(str(self.runs), "<root>")
        # A hint names the store it read: `--dir DIR` or `--store URL`.
        text = re.sub(r"--(dir|store) <root>", "--<store> <root>", text)
        return re.sub(r"<root>/([A-Za-z0-9._-]+)\.json", r"<root>/\1", text)


def clean(url: str) -> None:
    """An empty store: every run and queue row gone (tables exist once resumable used the database)."""
    have = [t for (t,) in sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                   " AND tablename LIKE 'resumable%%' AND tablename <> 'resumable_schema'")]
    if have:
        sql(url, "TRUNCATE " + ", ".join(have) + " CASCADE")
