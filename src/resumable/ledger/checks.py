"""What ``validate`` checks beyond the model: OmniNode's two warnings, and (new) evidence on disk:
artifact paths under a root directory, commit SHAs in git repositories.

The git check runs ``git -C DIR cat-file -e <sha>^{commit}`` with a fixed argv, no shell, read-only,
with the environment's GIT_DIR-style overrides removed so that DIR is the repository asked.
"""

from __future__ import annotations

import datetime as dt
import os

import msgspec

from resumable.errors import InvalidInputError
from resumable.ledger.model import SCHEMA_VERSION, Checkpoint, Schema

FUTURE_SKEW = dt.timedelta(seconds=60)
_GIT_ENV_OVERRIDES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                      "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE")


def warnings_of(checkpoint: Checkpoint, now: dt.datetime) -> list[str]:
    warnings = []
    if checkpoint.schema_version != SCHEMA_VERSION:
        warnings.append(f"Schema version mismatch: expected {SCHEMA_VERSION}, got {checkpoint.schema_version}")
    if checkpoint.timestamp_utc > now + FUTURE_SKEW:
        warnings.append("timestamp_utc is in the future")
    return warnings


def root_problems(checkpoint: Checkpoint, root: str) -> list[str]:
    """Each artifact path must exist under ``root`` and, links resolved, stay inside it."""
    if "\x00" in root:
        raise InvalidInputError(f"--root {root!r} holds a NUL character")
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        raise InvalidInputError(f"--root {root} is not a directory")
    problems = []
    for path in checkpoint.artifact_paths:
        real = os.path.realpath(os.path.join(real_root, path))
        if os.path.commonpath([real_root, real]) != real_root:
            problems.append(f"Artifact path escapes root {root}: {path}")
        elif not os.path.exists(real):
            problems.append(f"Artifact path does not exist under {root}: {path}")
    return problems


class Repos(msgspec.Struct, frozen=True):
    """``--repo DIR`` (the default repository) and ``--repo NAME=DIR`` (for repo_commit_map[NAME])."""

    default: str | None = None
    named: dict[str, str] = msgspec.field(default_factory=dict)

    @classmethod
    def parse(cls, specs: list[str] | tuple[str, ...]) -> Repos:
        default = None
        named: dict[str, str] = {}
        for spec in specs:
            if "\x00" in spec:
                raise InvalidInputError(f"--repo {spec!r} holds a NUL character")
            name, sep, path = spec.partition("=")
            if sep and name and "/" not in name and path:
                named[name] = path
            elif default is None:
                default = spec
            else:
                raise InvalidInputError(f"--repo given twice without a name ({default}, {spec}); "
                                        "name the others: --repo NAME=DIR")
        return cls(default, named)

    def __bool__(self) -> bool:
        return self.default is not None or bool(self.named)

    def for_key(self, key: str | None) -> str | None:
        return self.named.get(key, self.default) if key is not None else self.default


def commit_shas(checkpoint: Checkpoint, schema: Schema) -> list[tuple[str | None, str, str]]:
    """(repo key or None, label, sha) for every SHA the checkpoint names."""
    shas: list[tuple[str | None, str, str]] = [(repo, f"repo '{repo}'", sha)
                                               for repo, sha in checkpoint.repo_commit_map.items()]
    spec = schema.phases.get(checkpoint.phase)
    for f in spec.fields if spec else ():
        if f.kind == "sha":
            shas.append((None, f"phase_payload.{f.name}", getattr(checkpoint.phase_payload, f.name)))
    return shas


def repo_problems(checkpoint: Checkpoint, schema: Schema, repos: Repos, checked: dict[str, bool]) -> list[str]:
    """Each SHA must name a commit in its repository (SHAs with no repository given are not checked).
    ``checked`` caches which directories are git repositories."""
    problems = []
    for key, label, sha in commit_shas(checkpoint, schema):
        directory = repos.for_key(key)
        if directory is None:
            continue
        if directory not in checked:
            checked[directory] = _git(directory, "rev-parse", "--git-dir") == 0
        if not checked[directory]:
            raise InvalidInputError(f"--repo {directory} is not a git repository")
        if _git(directory, "cat-file", "-e", f"{sha}^{{commit}}") != 0:
            problems.append(f"Commit {sha} ({label}) not found in {directory}")
    return problems


def _git(directory: str, *args: str) -> int:
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_OVERRIDES}
    try:
        return subprocess.run(["git", "-C", directory, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env, check=False, timeout=60).returncode
    except FileNotFoundError as exc:
        raise InvalidInputError("git is not installed (it is needed for --repo)") from exc
    except subprocess.TimeoutExpired as exc:
        raise InvalidInputError(f"git in {directory} did not answer within 60 s") from exc
