"""Where checkpoints live and what their files are called (OmniNode's layout, unchanged):

    <base>/<ticket_id>/<run-uuid>/phase_<ordinal>_<phase>_a<attempt>.yaml

The base directory is ``--base-dir``, else ``$ONEX_STATE_DIR/checkpoints`` (where OmniNode's
documentation says checkpoints are), else ``~/.claude/checkpoints`` (where OmniNode's code writes
them). HOME is read at each call: OmniNode froze it at import, so a later change was ignored.
"""

from __future__ import annotations

import os

TEMP_PREFIX = ".ckpt_"
TEMP_SUFFIX = ".tmp"


def resolve_base_dir(base_dir: str | os.PathLike[str] | None = None) -> str:
    """The checkpoint root, absolute. An explicit one obeys OmniNode's rules (absolute, no '..')."""
    from resumable.errors import InvalidInputError

    if base_dir is not None:
        if not isinstance(base_dir, str | os.PathLike):
            raise InvalidInputError(
                f"Invalid base_dir type: expected str or Path, got {type(base_dir).__name__}")
        path = os.fspath(base_dir)
        if not os.path.isabs(path):
            raise InvalidInputError(f"base_dir must be an absolute path, got: {path}")
        if ".." in path.split(os.sep):
            raise InvalidInputError(f"base_dir must not contain '..' components, got: {path}")
        return path
    state = os.environ.get("ONEX_STATE_DIR")
    if state:
        if not os.path.isabs(state):
            raise InvalidInputError(f"ONEX_STATE_DIR must be an absolute path, got: {state}")
        return os.path.join(state, "checkpoints")
    home = os.path.expanduser("~")
    if home == "~" or not os.path.isabs(home):
        raise InvalidInputError("cannot find the home directory (HOME is not set); pass --base-dir")
    return os.path.join(home, ".claude", "checkpoints")


def file_name(ordinal: int, phase: str, attempt: int) -> str:
    return f"phase_{ordinal}_{phase}_a{attempt}.yaml"


def phase_prefix(ordinal: int, phase: str) -> str:
    return f"phase_{ordinal}_{phase}_a"


def parse_file_name(name: str) -> tuple[int, str, int] | None:
    """(ordinal, phase, attempt) of a checkpoint file name, or None. The attempt is the digits after
    the LAST ``_a`` (OmniNode's rule), compared as a number, so a10 is newer than a2."""
    if not (name.startswith("phase_") and name.endswith(".yaml")):
        return None
    stem = name[6:-5]
    ordinal, sep, rest = stem.partition("_")
    phase, sep2, attempt = rest.rpartition("_a")
    if not (sep and sep2 and phase and ordinal.isdigit() and attempt.isdigit() and ordinal.isascii()
            and attempt.isascii()):
        return None
    return int(ordinal), phase, int(attempt)


def is_temp_name(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)
