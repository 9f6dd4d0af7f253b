"""Which task ids are integrated: ``Task-Id`` trailers on commits reachable from a ref, by real git.

Only read-only git subcommands are ever run (ulpi's allowlist: rev-parse, rev-list, log, show,
cat-file, merge-base), with a fixed argv and no shell. The environment git sees is cleaned: a
``GIT_DIR``/``GIT_WORK_TREE``/``GIT_INDEX_FILE``/... inherited from a hook or a wrapper would make
git read a different repository than ``--repo`` names, and ``GIT_CONFIG_*`` or user configuration
could change the log's format (``log.showSignature`` injects gpg output, ``i18n.logOutputEncoding``
re-encodes messages). Kept: what locates git and its configuration files (``GIT_EXEC_PATH``,
``GIT_CONFIG_GLOBAL``/``SYSTEM``/``NOSYSTEM``) and what bounds repository discovery
(``GIT_CEILING_DIRECTORIES``, ``GIT_DISCOVERY_ACROSS_FILESYSTEM``). Never prompts, never takes
optional locks, never fetches lazily in a partial clone.

Deliberate difference from ulpi's pipeline: its ``%H%x1f%B%x1e`` records break on a message that holds
those bytes, so records are NUL-separated (``-z``; git refuses NUL in a message). And a ref that
does not resolve is an error (exit 1) unless the caller says a missing ref means "nothing
integrated yet" (ulpi's silent empty map, which hides a typo).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Final

from resumable.errors import InvalidInputError
from resumable.git.trailers import parse_trailers

READ_ONLY: Final = frozenset(("rev-parse", "rev-list", "log", "show", "cat-file", "merge-base"))
_KEEP_GIT_ENV: Final = frozenset((
    "GIT_EXEC_PATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
    "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
))
_CONFIG: Final = (
    "-c", "core.quotepath=off", "-c", "log.showSignature=false", "-c", "i18n.logOutputEncoding=UTF-8",
    "-c", "color.ui=never",
)
_SHA: Final = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (the process environment) without the GIT_* variables that redirect or reshape git."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("GIT_") or k in _KEEP_GIT_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_NO_LAZY_FETCH="1", GIT_PAGER="cat",
               LC_ALL="C")
    return env


def _first_error_line(stderr: bytes) -> str:
    for raw in stderr.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line and not line.startswith("hint:"):
            return line.removeprefix("fatal: ").removeprefix("error: ")
    return "git failed"


def run_git(repo: str, args: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
    """One read-only git command in ``repo``; returns the completed process (any exit status)."""
    if not args or args[0] not in READ_ONLY:
        raise ValueError(f"git subcommand not read-only: {args[:1]}")
    argv = ["git", "--no-pager", "--no-optional-locks", "-C", repo, *_CONFIG, *args]
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=git_env(), check=False)
    except FileNotFoundError as exc:
        raise InvalidInputError("git is not installed (no 'git' on PATH); reconcile needs it") from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot run git: {exc.strerror}") from exc


def resolve_ref(repo: str | os.PathLike[str], ref: str, *, allow_missing: bool = False) -> str | None:
    """The commit ``ref`` names in ``repo``. One-line errors: not a directory, not a git repository,
    a ref that is not a single revision or does not name a commit (None instead when
    ``allow_missing``)."""
    where = os.fspath(repo)
    if not os.path.isdir(where):
        raise InvalidInputError(f"--repo {where}: no such directory")
    if not isinstance(ref, str) or not ref or "\0" in ref:
        raise InvalidInputError("--ref must be a non-empty git revision such as 'main'")
    probe = run_git(where, ["rev-parse", "--git-dir"])
    if probe.returncode != 0:
        reason = _first_error_line(probe.stderr)
        if "not a git repository" in reason:
            raise InvalidInputError(f"{where} is not a git repository (use --repo DIR)")
        raise InvalidInputError(f"git cannot read {where}: {reason}")
    # --end-of-options: a ref such as '--output=x' is a name to resolve, never an option to obey.
    found = run_git(where, ["rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}"])
    sha = found.stdout.strip()
    if found.returncode != 0 or not _SHA.fullmatch(sha):
        if allow_missing:
            return None
        raise InvalidInputError(f"ref {ref!r} does not resolve to a commit in {where}")
    return sha.decode("ascii")


def _records(out: bytes) -> list[tuple[str, str]]:
    """``(sha, message)`` per commit from ``git log -z --format=%H%n%B`` output, newest first."""
    records: list[tuple[str, str]] = []
    for chunk in out.split(b"\0"):
        sha, _, body = chunk.lstrip(b"\n").partition(b"\n")
        if _SHA.fullmatch(sha):
            records.append((sha.decode("ascii"), body.decode("utf-8", "replace")))
        elif records and chunk:  # a message git let hold a NUL (fast-import): keep it whole
            prev_sha, prev_body = records[-1]
            records[-1] = (prev_sha, prev_body + "\0" + chunk.decode("utf-8", "replace"))
    return records


def integrated_task_ids(
    repo: str | os.PathLike[str],
    ref: str,
    run_id: str | None = None,
    *,
    allow_missing_ref: bool = False,
) -> dict[str, str]:
    """``{task_id: sha}`` for every ``Task-Id`` trailer on a commit reachable from ``ref``, the
    newest such commit winning (git log's order), in that order. With ``run_id``, a commit whose
    ``Run-Id`` trailer names another run is ignored; a commit without ``Run-Id`` still counts."""
    where = os.fspath(repo)
    tip = resolve_ref(where, ref, allow_missing=allow_missing_ref)
    if tip is None:
        return {}
    done = run_git(where, ["log", "-z", "--no-show-signature", "--format=%H%n%B", tip, "--"])
    if done.returncode != 0:
        raise InvalidInputError(f"git log {ref} failed in {where}: {_first_error_line(done.stderr)}")
    keys = ("Task-Id", "Run-Id") if run_id is not None else ("Task-Id",)
    out: dict[str, str] = {}
    for sha, message in _records(done.stdout):
        if "Task-Id:" not in message:
            continue
        found = parse_trailers(message, keys)
        task = found.get("Task-Id")
        if not task or task in out:
            continue
        other_run = found.get("Run-Id")
        if run_id is not None and other_run and other_run != run_id:
            continue
        out[task] = sha
    return out


def is_shallow(repo: str | os.PathLike[str]) -> bool:
    """A shallow clone hides old commits: a done unit integrated before the cut looks stale."""
    done = run_git(os.fspath(repo), ["rev-parse", "--is-shallow-repository"])
    return done.returncode == 0 and done.stdout.strip() == b"true"
