"""Copying the shipped skills to where an agent looks for them, without ever losing a user's edit.

Where each agent reads skills (its documentation's locations):

    Claude Code   project: <project>/.claude/skills    user: ~/.claude/skills
    Codex         project: <project>/.agents/skills    user: ~/.agents/skills

``<project>`` is the nearest directory holding ``.git``, walking up from here (else here). An
install writes each skill as ``<dir>/<name>/SKILL.md`` and records what it wrote (a SHA-256 per
skill) in ``<dir>/.resumable-skills.json``. A skill already there is rewritten only when it is
exactly what resumable wrote last time (an older version of it): one that differs from that record
was changed by someone (or is not ours), and is overwritten only with ``force``. The whole install
is decided before anything is written, so a refusal writes nothing; an install of what is already
there writes nothing either.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass

from resumable import fsio, skills
from resumable.errors import InvalidInputError, RefusedError

AGENTS: dict[str, tuple[str, str]] = {
    "claude": (".claude/skills", "~/.claude/skills"),
    "codex": (".agents/skills", "~/.agents/skills"),
}
MANIFEST = ".resumable-skills.json"
FORMAT = 1


def project_root(start: str) -> str:
    """The nearest directory holding ``.git`` walking up from ``start``, else ``start``."""
    here = os.path.abspath(start)
    for d in (here, *_parents(here)):
        if os.path.exists(os.path.join(d, ".git")):
            return d
    return here


def _parents(path: str) -> list[str]:
    out: list[str] = []
    while True:
        up = os.path.dirname(path)
        if up == path:
            return out
        out.append(up)
        path = up


def target_dir(agent: str, scope: str, path: str | None = None, *, cwd: str | None = None) -> str:
    """The directory skills go to: ``scope`` is "project", "user" or "dir" (``path``)."""
    if agent not in AGENTS:
        raise InvalidInputError(f"unknown agent {agent!r}; resumable installs skills for {', '.join(AGENTS)}")
    if scope == "dir":
        if not path:
            raise InvalidInputError("--dir needs a directory")
        return os.path.abspath(path)
    project, user = AGENTS[agent]
    if scope == "user":
        home = os.environ.get("HOME") or os.path.expanduser("~")
        return os.path.join(home, user[2:])
    return os.path.join(project_root(cwd or os.getcwd()), project)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Action:
    name: str
    path: str
    what: str  # "create", "update" (resumable's older copy), "overwrite" (--force), "unchanged"

    @property
    def writes(self) -> bool:
        return self.what != "unchanged"


def read_manifest(dest: str) -> dict[str, str]:
    """What resumable last wrote in ``dest`` ({skill: sha256}); empty when there is no readable record
    (then every existing skill counts as someone else's: the safe side)."""
    try:
        raw = fsio.read_bytes(os.path.join(dest, MANIFEST))
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return {}
    got = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(got, dict):
        return {}
    return {k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, str)}


def _existing(path: str) -> bytes | None:
    """The SKILL.md at ``path`` (None: absent). A link or anything but a regular file counts as
    someone else's file: its content is reported as unreadable (b"")."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return b""
    try:
        return fsio.read_bytes(path)
    except OSError:
        return b""


def plan(dest: str, *, force: bool = False) -> list[Action]:
    """What an install into ``dest`` would do; RefusedError naming every skill it would clobber."""
    record = read_manifest(dest)
    actions: list[Action] = []
    refused: list[str] = []
    for name in skills.names():
        folder = os.path.join(dest, name)
        path = os.path.join(folder, "SKILL.md")
        if os.path.islink(folder):
            raise RefusedError(f"{folder} is a symbolic link: resumable does not write through it; remove it"
                               " or install elsewhere (--dir) (nothing was written)")
        shipped = digest(skills.text(name))
        have = _existing(path)
        if have is None:
            actions.append(Action(name, path, "create"))
        elif digest(have) == shipped:
            actions.append(Action(name, path, "unchanged"))
        elif record.get(name) == digest(have):
            actions.append(Action(name, path, "update"))
        elif force:
            actions.append(Action(name, path, "overwrite"))
        else:
            refused.append(path)
    if refused:
        raise RefusedError(f"refusing to overwrite {', '.join(refused)}: changed since resumable wrote it (or not"
                           " written by resumable); keep your edit, or pass --force to replace it (nothing was"
                           " written)")
    return actions


def install(dest: str, *, force: bool = False, writer: str = "resumable") -> list[Action]:
    """Install every shipped skill into ``dest`` (created if missing); returns what was done.
    ``writer`` is recorded in the manifest (the CLI gives its version)."""
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise InvalidInputError(f"{dest} exists and is not a directory")
    actions = plan(dest, force=force)
    if not any(a.writes for a in actions):
        return actions
    os.makedirs(dest, exist_ok=True)
    record = read_manifest(dest)
    for action in actions:
        if not action.writes:
            continue
        folder = os.path.dirname(action.path)
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        fsio.atomic_write(action.path, skills.text(action.name))
        record[action.name] = digest(skills.text(action.name))
    manifest = {"format": FORMAT, "writtenBy": writer, "skills": dict(sorted(record.items()))}
    fsio.atomic_write(os.path.join(dest, MANIFEST), (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
    return actions
