"""Keys: the same call gets the same key in every process and on every Python we support; values
without one stable JSON form are refused, never keyed by something that could change."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.durable.keys import Binder, UnkeyableArguments, arguments_key, canonical, custom_key
from resumable.errors import InvalidInputError

from .helpers import SRC

# Golden keys: a change here re-runs every user's recorded steps. Never change one without a
# migration story.
GOLDEN = [
    ({"doc_id": "abc"}, "f36dfe95e28c78662f91"),
    ({"x": 1, "y": 2.5}, "72eefc1cb8f1949209cf"),
    ({"s": "é\u2603\U0001f600"}, "0308ad02875986a3ad7f"),
    ({"l": [1, [2, {"b": None, "a": True}]]}, "5b485882ff32b04a6e27"),
    ({"f": 1e300, "g": -0.0, "h": 0.1}, "8cf0783309e005b32144"),
    ({"big": 2**100}, "03d5c56c79b7c888dafb"),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize(("bound", "key"), GOLDEN)
def test_golden_keys(bound: dict[str, Any], key: str) -> None:
    assert arguments_key(bound, "s") == key


@settings(max_examples=300)
@given(json_values)
def test_a_value_and_its_json_round_trip_have_one_key(value: Any) -> None:
    key = arguments_key({"v": value}, "s")
    again = json.loads(canonical({"v": value}))
    assert arguments_key(again, "s") == key


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=6), st.integers(), max_size=6))
def test_key_order_does_not_matter(d: dict[str, int]) -> None:
    reordered = dict(reversed(list(d.items())))
    assert arguments_key({"d": d}, "s") == arguments_key({"d": reordered}, "s")


def test_positional_and_keyword_calls_bind_alike() -> None:
    def f(a: int, b: str = "x", *, c: float = 1.0) -> None: ...

    binder = Binder(f)
    assert binder.bind((1,), {}) == binder.bind((), {"a": 1}) == {"a": 1}
    assert binder.bind((1, "y"), {}) == binder.bind((1,), {"b": "y"})
    assert binder.bind((1,), {"c": 2.0}) == {"a": 1, "c": 2.0}
    with pytest.raises(TypeError):
        binder.bind((), {})
    with pytest.raises(TypeError):
        binder.bind((1,), {"a": 1})
    with pytest.raises(TypeError):
        binder.bind((1,), {"zzz": 1})

    def g(*args: int, **kwargs: int) -> None: ...

    assert Binder(g).bind((1, 2), {"k": 3}) == {"args": (1, 2), "kwargs": {"k": 3}}


class Color(IntEnum):
    RED = 1


class Name(str):
    pass


@pytest.mark.parametrize("value", [{1}, b"b", float("inf"), math.nan, Color.RED, Name("n"), {1: 2}, object(),
                                   [1, {"a": {2}}]])
def test_values_without_one_json_form_are_refused(value: Any) -> None:
    with pytest.raises(UnkeyableArguments, match="key="):
        arguments_key({"v": value}, "s")


def test_custom_keys() -> None:
    assert custom_key("doc-17", "s") == "doc-17"
    assert custom_key(17, "s") == "17"
    hashed = custom_key(["a", 1], "s")  # any other JSON value is hashed
    assert len(hashed) == 20 and hashed == custom_key(("a", 1), "s")
    for bad in ("", "a b", "a,b"):
        with pytest.raises(InvalidInputError):
            custom_key(bad, "s")


def corpus(n: int = 400) -> list[Any]:
    rng = random.Random(20261130)

    def value(depth: int) -> Any:
        kind = rng.randrange(8 if depth < 3 else 6)
        if kind == 0:
            return None
        if kind == 1:
            return rng.random() < 0.5
        if kind == 2:
            return rng.randrange(-(2**70), 2**70)
        if kind == 3:
            return rng.choice([0.1, -0.0, 1e-310, 1.7976931348623157e308, 2.5, rng.uniform(-1e6, 1e6)])
        if kind in (4, 5):
            return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000),
                                           rng.randrange(0xD800, 0xE000), rng.randrange(0x10000, 0x10FFFF)]))
                           for _ in range(rng.randrange(6)))
        if kind == 6:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {f"k{rng.randrange(50)}": value(depth + 1) for _ in range(rng.randrange(4))}

    return [{"a": value(0), "b": value(0)} for _ in range(n)]


KEYS_SCRIPT = """
import json, sys
from resumable.durable.keys import arguments_key
values = json.loads(sys.stdin.read())
print(json.dumps([arguments_key(v, "s") for v in values]))
"""


def interpreters() -> list[str]:
    found = [sys.executable]
    for version in ("3.11", "3.12", "3.13"):
        base = Path.home() / ".pyenv" / "versions"
        for path in sorted(base.glob(f"{version}.*/bin/python")) if base.is_dir() else []:
            found.append(str(path))
    return found


@pytest.mark.parametrize("python", interpreters())
def test_keys_are_the_same_in_every_process_and_version(python: str) -> None:
    values = corpus()
    expected = [arguments_key(v, "s") for v in values]
    data = json.dumps(values, ensure_ascii=True)
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([python, "-c", KEYS_SCRIPT], input=data, capture_output=True, text=True, env=env,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected
    golden = subprocess.run([python, "-c", KEYS_SCRIPT], input=json.dumps([g for g, _ in GOLDEN]),
                            capture_output=True, text=True, env=env, check=False, timeout=120)
    assert json.loads(golden.stdout) == [k for _, k in GOLDEN]
