"""What a low-level verb may cost at start-up: the one place the rule is written down.

The low-level verbs (``init``, ``unit``, ``get``, ...) are called thousands of times from shell loops, so
a call must stay within a small factor of a bare interpreter (``benchmarks/transitions.py`` measures
it). Each module below costs a millisecond or more to import and none is needed to record a
transition; ``tests/test_launcher.py`` runs the installed command under ``-X importtime`` and fails
if a low-level verb imports any of them. Code on a low-level verb's path imports these lazily, inside the
function that needs them, or not at all.
"""

from __future__ import annotations

LOW_LEVEL_VERBS = ("init", "unit", "phase", "get", "resume", "item", "resolve", "validation", "finalize", "gc")

# Modules a low-level verb must not import (beyond what the interpreter imports at start-up).
LOW_LEVEL_VERB_MUST_NOT_IMPORT = frozenset({
    "re", "json", "enum", "typing", "pathlib", "dataclasses", "click", "orjson", "rich", "importlib",
    "collections", "functools", "inspect", "argparse", "datetime", "yaml", "msgspec", "pydantic",
    "psycopg", "tomllib", "subprocess", "hashlib", "secrets", "socket", "threading", "mcp",
})
