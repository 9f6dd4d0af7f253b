"""Identifiers of the ledger: run ids, ticket ids, commit SHAs, phase names.

Pure functions over strings (standard library only). The run-id mapping is OmniNode's, byte for byte,
so that a short id used with OmniNode's tools and with resumable lands in the same run directory.
"""

from __future__ import annotations

import re
import uuid

# uuid5(NAMESPACE_DNS, "onex.omninode.io"): OmniNode's namespace for short run ids.
ONEX_NAMESPACE = uuid.UUID("e176b05f-f761-5a9d-9a51-ac6d5a3566ee")

# One SHA rule for the model, the validator and every payload field (OmniNode had two: any length
# in the model, 7-40 in the validator, so a write could succeed and its validate fail).
SHA_PATTERN = "^[0-9a-f]{7,40}$"
_SHA = re.compile(SHA_PATTERN)

# Ticket ids and guard names become one directory or file name: no '/', no '..', nothing a shell or
# a path join could read as more than one component.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PHASE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def normalize_run_id(run_id: str) -> str:
    """The canonical run-directory name for ``run_id``.

    A UUID in any form Python accepts (hyphenless, braces, ``urn:uuid:``, upper case) becomes its
    canonical lower-case hyphenated form; anything else, including the empty string, maps to the
    OmniNode's deterministic UUIDv5 in ``ONEX_NAMESPACE``.
    """
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        return str(uuid.uuid5(ONEX_NAMESPACE, run_id))


def is_sha(value: object) -> bool:
    return isinstance(value, str) and _SHA.fullmatch(value) is not None


def name_problem(value: object, what: str) -> str | None:
    """Why ``value`` cannot be a ticket id (or guard name), or None when it can."""
    if not isinstance(value, str) or _NAME.fullmatch(value) is None or value in (".", ".."):
        return (f"Invalid {what} {value!r}: use 1-64 characters of A-Z a-z 0-9 . _ - "
                "(not '.' or '..')")
    return None


def phase_name_problem(value: object) -> str | None:
    if not isinstance(value, str) or _PHASE.fullmatch(value) is None:
        return f"Invalid phase name {value!r}: use a lower-case letter then up to 63 of a-z 0-9 _"
    return None
