"""What a step's result depends on, and whether its outputs are still what it produced.

A fingerprint has separate parts (command, env, cwd, each input's content) so that a re-run can say
*which* one changed. File checks (inputs and artifacts) compare size and mtime first and hash only
when they differ: rehashing a multi-gigabyte artifact on every resume is the seed's weakness 3.6(4).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resumable.runner.jobfile import Step

FINGERPRINT_VERSION = 1
_CHUNK = 1 << 20


# One encoder for every hash (json.dumps would build one per call); the bytes hashed are exactly
# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False), as stored hashes were.
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_STRING = json.encoder.encode_basestring  # what the encoder above writes for a string
_ENV_SHAS: dict[tuple[tuple[str, str], ...], str] = {}  # most steps share their job's environment


def _sha(value: object) -> str:
    return hashlib.sha256(_ENCODE(value).encode("utf-8")).hexdigest()


def _argv_sha(argv: list[str]) -> str:
    """``_sha(argv)`` without building an encoder per call: the same bytes, a list of strings."""
    text = "[" + ",".join(map(_STRING, argv)) + "]"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _env_sha(env: tuple[tuple[str, str], ...]) -> str:
    sha = _ENV_SHAS.get(env)
    if sha is None:
        sha = _ENV_SHAS[env] = _sha(list(env))
    return sha


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def resolve(step: Step, path: str) -> str:
    return os.path.normpath(os.path.join(step.cwd, os.path.expanduser(path)))


def file_record(path: str, previous: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """``{"size", "mtimeNs", "sha256"}`` of a file, or None when it is missing. When ``previous``
    has the same size and mtime its hash is reused (the cheap path on every resume)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if previous and previous.get("size") == st.st_size and previous.get("mtimeNs") == st.st_mtime_ns \
            and isinstance(previous.get("sha256"), str):
        return {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "sha256": previous["sha256"]}
    try:
        digest = sha256_file(path)
    except OSError:
        return None
    return {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "sha256": digest}


def fingerprint(step: Step, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The step's fingerprint as stored on its unit (``fingerprint`` field)."""
    inputs: dict[str, Any] = {}
    if step.inputs:
        prev_inputs = previous.get("inputs") if isinstance(previous, dict) else None
        if not isinstance(prev_inputs, dict):
            prev_inputs = {}
        for p in step.inputs:
            prev = prev_inputs.get(p)
            inputs[p] = file_record(resolve(step, p), prev if isinstance(prev, dict) else None)
    out = {
        "v": FINGERPRINT_VERSION,
        # argv rather than the text: the same text under another shell is another command.
        "command": _argv_sha(step.argv),
        "env": _env_sha(step.env),
        "cwd": step.cwd,
    }
    if inputs:  # absent means none (the check below reads it so): one dict less per unit
        out["inputs"] = inputs
    return out


def unchanged(step: Step, stored: object) -> bool:
    """``not fingerprint_changes(step, stored)``, checked without building a fingerprint when the
    step has no inputs (what every re-run asks of every step)."""
    if step.inputs or not isinstance(stored, dict):
        return not fingerprint_changes(step, stored)
    return (
        stored.get("v") == FINGERPRINT_VERSION
        and stored.get("cwd") == step.cwd
        and not stored.get("inputs")
        and stored.get("command") == _argv_sha(step.argv)
        and stored.get("env") == _env_sha(step.env)
    )


def fingerprint_changes(step: Step, stored: object) -> list[str]:
    """Reasons the stored fingerprint no longer matches, most telling first; [] when unchanged."""
    if not isinstance(stored, dict) or stored.get("v") != FINGERPRINT_VERSION:
        return ["fingerprint not recorded"]
    now = fingerprint(step, stored)
    reasons: list[str] = []
    if now["command"] != stored.get("command"):
        reasons.append("command changed")
    if now["env"] != stored.get("env"):
        reasons.append("env changed")
    if now["cwd"] != stored.get("cwd"):
        reasons.append("cwd changed")
    old_inputs = stored.get("inputs")
    if not isinstance(old_inputs, dict):
        old_inputs = {}
    if not old_inputs and not step.inputs:
        return reasons
    for p, rec in now["inputs"].items():
        old = old_inputs.get(p)
        old_sha = old.get("sha256") if isinstance(old, dict) else None
        new_sha = rec.get("sha256") if rec else None
        if p not in old_inputs:
            reasons.append(f"input added: {p}")
        elif new_sha != old_sha:
            reasons.append(f"input {'missing' if rec is None else 'changed'}: {p}")
    for p in old_inputs:
        if p not in now["inputs"]:
            reasons.append(f"input removed: {p}")
    return reasons


@dataclass(frozen=True)
class ArtifactCheck:
    ok: bool
    reason: str  # "" when ok


def artifact_records(step: Step) -> dict[str, Any]:
    """Records of every declared artifact after a successful exit; missing ones map to None."""
    return {p: file_record(resolve(step, p)) for p in step.artifacts}


def check_artifacts(step: Step, stored: object) -> ArtifactCheck:
    """Every declared artifact exists with the content recorded when the step finished."""
    if not step.artifacts:
        return _OK
    recs = stored if isinstance(stored, dict) else {}
    for p in step.artifacts:
        path = resolve(step, p)
        old = recs.get(p)
        if not os.path.exists(path):
            return ArtifactCheck(False, f"artifact missing: {p}")
        if not isinstance(old, Mapping) or not isinstance(old.get("sha256"), str):
            return ArtifactCheck(False, f"artifact not recorded: {p}")
        try:
            st = os.stat(path)
        except OSError:
            return ArtifactCheck(False, f"artifact missing: {p}")
        if old.get("size") == st.st_size and old.get("mtimeNs") == st.st_mtime_ns:
            continue
        try:
            same = sha256_file(path) == old["sha256"]
        except OSError:
            same = False
        if not same:
            return ArtifactCheck(False, f"artifact changed: {p}")
    return _OK


_OK = ArtifactCheck(True, "")
