"""jsonio against the standard library's json: byte-identical output, identical decoding, the same
strictness, on every path (the C accelerator, the pure-Python fallback, orjson for big documents).

Output differs from the standard library's in one way, on purpose: DEL and the C1 controls are
escaped (``\\u007f``, ``\\u009b``), never written raw. The reference below is the standard
library's text with those characters escaped by a regular expression (an implementation independent
of jsonio's byte-level one), and ``canonical`` is compared against the standard library unchanged.

Values are compared through ``repr`` so that an int that came back as a float (1 vs 1.0), or keys
in another order, count as differences."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.core import jsonio

_STD_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_STD_PRETTY = json.JSONEncoder(ensure_ascii=False, indent=2, allow_nan=False)
_CONTROLS = re.compile("[\x7f-\x9f]")


class _Escaping:
    """A standard encoder whose text has DEL and C1 escaped: what jsonio's output must equal."""

    def __init__(self, encoder: json.JSONEncoder) -> None:
        self.encoder = encoder

    def encode(self, value: Any) -> str:
        return _CONTROLS.sub(lambda m: f"\\u{ord(m[0]):04x}", self.encoder.encode(value))


STD_COMPACT = _Escaping(_STD_COMPACT)
STD_PRETTY = _Escaping(_STD_PRETTY)


def _without_c_accelerator() -> ModuleType:
    """A fresh copy of jsonio imported as if ``_json`` did not exist (as on a non-CPython)."""
    saved = sys.modules.get("_json")
    sys.modules["_json"] = None  # type: ignore[assignment]  # makes `import _json` fail
    try:
        spec = importlib.util.spec_from_file_location("jsonio_without_c", jsonio.__file__)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["_json"]
        else:
            sys.modules["_json"] = saved
    return module


FALLBACK = _without_c_accelerator()
MODULES = [jsonio, FALLBACK]
IDS = ["c", "fallback"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=40,
)


def same(a: Any, b: Any) -> bool:
    return repr(a) == repr(b)


def test_fallback_really_is_the_fallback() -> None:
    assert jsonio._HAVE_C
    assert not FALLBACK._HAVE_C


# --- encoding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@given(value=json_values)
def test_dumps_is_the_standard_compact_encoding(mod: ModuleType, value: Any) -> None:
    assert mod.dumps(value) == STD_COMPACT.encode(value).encode("utf-8")


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@given(value=st.dictionaries(st.text(), st.text(), max_size=8))
def test_an_object_of_strings_is_the_standard_compact_encoding(mod: ModuleType, value: dict[str, str]) -> None:
    """Such an object (a unit transition's event) takes a shorter path: the same bytes."""
    assert mod.dumps(value) == STD_COMPACT.encode(value).encode("utf-8")


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
def test_an_object_of_strings_fails_as_the_encoder_does(mod: ModuleType) -> None:
    for value in ({"t": "unit", "note": "ok \udcff"}, {"t": "unit", "\ud800": "x"}):
        with pytest.raises(UnicodeEncodeError) as short:
            mod.dumps(value)
        with pytest.raises(UnicodeEncodeError) as standard:
            STD_COMPACT.encode(value).encode("utf-8")
        assert str(short.value) == str(standard.value)


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@given(value=json_values)
def test_dumps_pretty_is_the_standard_indented_encoding(mod: ModuleType, value: Any) -> None:
    expected = STD_PRETTY.encode(value).encode("utf-8")
    assert mod.dumps_pretty(value) == expected
    # Our own indenting encoder, whatever the C encoder can do on this Python (its text is escaped
    # on the way out, by dumps_pretty).
    assert mod._pretty_python(value) == _STD_PRETTY.encode(value)


@given(
    keys=st.lists(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        max_size=6,
    )
)
def test_non_string_keys_as_the_standard_library_prints_them(keys: list[Any]) -> None:
    value = {k: i for i, k in enumerate(keys)}
    for mod in MODULES:
        assert mod.dumps(value) == STD_COMPACT.encode(value).encode("utf-8")
        assert mod.dumps_pretty(value) == STD_PRETTY.encode(value).encode("utf-8")
        assert mod._pretty_python(value) == _STD_PRETTY.encode(value)


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@given(value=json_values)
def test_canonical_is_the_standard_compact_encoding_unescaped(mod: ModuleType, value: Any) -> None:
    """What item ids hash: JSON.stringify's bytes, C1 raw, as the seed hashes them."""
    assert mod.canonical(value) == _STD_COMPACT.encode(value).encode("utf-8")


CONTROL_TEXT = "a\x7fb\x80c\x9bd\x9fe\xa0f\u00c2g\x1bh\u0100"


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@pytest.mark.parametrize("big", [False, True], ids=["small", "big"])
def test_output_never_holds_del_or_c1_controls(mod: ModuleType, big: bool) -> None:
    value = {CONTROL_TEXT: [CONTROL_TEXT, {"k": CONTROL_TEXT}], "pad": "x" * (jsonio.BIG if big else 0)}
    flat = {"t": "unit", "note": CONTROL_TEXT}  # the journal's all-strings shortcut
    for data in (mod.dumps(value), mod.dumps_pretty(value, big=big), mod.dumps(flat), mod.dumps(CONTROL_TEXT)):
        text = data.decode("utf-8")
        assert not _CONTROLS.search(text) and "\x1b" not in text
        assert "\\u007f" in text and "\\u0080" in text and "\\u009b" in text and "\\u009f" in text
        assert "\xa0" in text and "\u00c2" in text and "\u0100" in text  # printable: left as they are
    assert mod.loads(mod.dumps(value)) == value == json.loads(mod.dumps_pretty(value, big=big))
    assert mod.canonical(flat) == _STD_COMPACT.encode(flat).encode("utf-8")  # raw, for hashing


def test_escaped_output_reads_in_jq(tmp_path: Any) -> None:
    import shutil

    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    data = jsonio.dumps_pretty({"note": CONTROL_TEXT})
    out = subprocess.run(["jq", "-j", ".note"], input=data, capture_output=True, check=True).stdout
    assert out.decode("utf-8") == CONTROL_TEXT


def test_pretty_layout() -> None:
    value = {"a": [], "b": {}, "c": [1, {"d": None}], "e": "é\n", "f": (True, False, 1.5)}
    assert jsonio.dumps_pretty(value) == (
        b'{\n  "a": [],\n  "b": {},\n  "c": [\n    1,\n    {\n      "d": null\n    }\n  ],\n'
        b'  "e": "\xc3\xa9\\n",\n  "f": [\n    true,\n    false,\n    1.5\n  ]\n}'
    )
    for mod in MODULES:
        assert mod.dumps_pretty([]) == b"[]"
        assert mod.dumps_pretty({}) == b"{}"
        assert mod.dumps_pretty("x") == b'"x"'
        assert mod._pretty_python(None) == "null"


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), [1, {"x": float("nan")}],
                                 {float("inf"): 1}])
def test_encoders_refuse_nan_and_infinity(mod: ModuleType, bad: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        mod.dumps(bad)
    with pytest.raises(ValueError, match="Out of range float"):
        mod.dumps_pretty(bad)
    with pytest.raises(ValueError, match="Out of range float"):
        mod._pretty_python(bad)


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
def test_encoders_refuse_what_json_cannot_hold(mod: ModuleType) -> None:
    for encode in (mod.dumps, mod.dumps_pretty, mod._pretty_python):
        with pytest.raises(TypeError, match="Object of type bytes is not JSON serializable"):
            encode({"a": [b"x"]})
        with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
            encode({1, 2})
        with pytest.raises(TypeError, match="keys must be str, int, float, bool or None, not tuple"):
            encode({(1, 2): 3})
        loop: list[Any] = []
        loop.append(loop)
        with pytest.raises(ValueError, match="Circular reference detected"):
            encode({"a": loop})
        # A failed call leaves nothing behind: the same value, fixed, encodes.
        loop.clear()
        encode({"a": loop})
    for to_bytes in (mod.dumps, mod.dumps_pretty):
        with pytest.raises(UnicodeEncodeError):
            to_bytes({"note": "\udcff"})  # undecodable argv bytes (surrogateescape)


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
def test_absurd_nesting_to_encode_is_a_value_error(mod: ModuleType) -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        mod.dumps(deep)
    with pytest.raises(ValueError, match="nested too deeply"):
        mod.dumps_pretty(deep)


def test_shared_values_are_not_circular() -> None:
    shared = {"x": [1]}
    value = {"a": shared, "b": shared, "c": [shared, shared]}
    for mod in MODULES:
        assert mod.dumps(value) == STD_COMPACT.encode(value).encode()
        assert mod.dumps_pretty(value) == STD_PRETTY.encode(value).encode()


# --- decoding ----------------------------------------------------------------------------------


def _std_loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@given(value=json_values, ascii=st.booleans(), indent=st.sampled_from([None, 0, 2, "\t"]),
       pad=st.sampled_from(["", " ", "\n", " \t\r\n "]))
def test_loads_is_the_standard_decoding(mod: ModuleType, value: Any, ascii: bool, indent: Any, pad: str) -> None:
    data = (pad + json.dumps(value, ensure_ascii=ascii, indent=indent) + pad).encode("utf-8")
    assert same(mod.loads(data), _std_loads(data))
    assert same(mod.loads(mod.dumps(value)), value)


@given(value=json_values, ascii=st.booleans())
def test_big_documents_decode_as_small_ones(value: Any, ascii: bool) -> None:
    # Padding past BIG sends the same document through orjson.
    data = json.dumps(value, ensure_ascii=ascii).encode("utf-8")
    big = b" " * (jsonio.BIG + 1) + data
    assert same(jsonio.loads(big), _std_loads(data))


@pytest.mark.parametrize(
    "text",
    [
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        '{"ns": 1732870000000000000, "big": [99999999999999999999, 9999999999999999999]}',
        '["\\ud83d\\ude00", "x\\\\ud800"]',  # a surrogate pair; an escaped backslash before "ud800"
        '{"a": 1, "b": 2, "a": 3}',
        '{"s": "1234567890123456789012345"}',
        "[0.12345678901234567890123, 1.5e300, -0.0, 5e-324]",
    ],
)
@pytest.mark.parametrize("big", [False, True], ids=["small", "big"])
def test_loads_is_lossless(text: str, big: bool) -> None:
    """orjson (above BIG) turns integers beyond 64 bits into floats; that may not show: a big
    document decodes exactly as a small one."""
    data = text.encode()
    padded = data + b" " * (jsonio.BIG + 1) if big else data
    for mod in MODULES:
        assert same(mod.loads(padded), _std_loads(data))


def test_duplicate_keys_last_wins_in_first_place() -> None:
    for mod in MODULES:
        assert list(mod.loads(b'{"a": 1, "b": 2, "a": 3}').items()) == [("a", 3), ("b", 2)]


BAD_DOCUMENTS = [
    b"",
    b"   ",
    b"nul",
    b"[1,]",
    b'{"a" 1}',
    b"[1] [2]",
    b"[1] x",
    b'"unterminated',
    b'"tab\there"',
    b"01",
    b"\xef\xbb\xbf{}",
    b"{'a': 1}",
]


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@pytest.mark.parametrize("data", BAD_DOCUMENTS)
@pytest.mark.parametrize("big", [False, True], ids=["small", "big"])
def test_bad_documents_fail_as_in_the_standard_library(mod: ModuleType, data: bytes, big: bool) -> None:
    if big:
        data = data + b" " * (jsonio.BIG + 1)
    with pytest.raises(json.JSONDecodeError) as ours:
        mod.loads(data)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.JSONDecoder().decode(data.decode("utf-8"))
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("mod", MODULES, ids=IDS)
@pytest.mark.parametrize(
    "data",
    [b"NaN", b"Infinity", b"-Infinity", b"[1, NaN]", b"1e999", b"-1e999", b'{"x": [1e400]}', b"\xff", b'"\xc3"',
     b"[" * 100_000, b'{"a":' * 100_000,
     # Lone surrogate escapes: no UTF-8 file can hold the string they make (found by fuzzing the
     # CLI: an internal error when the value was stored).
     b'["\\ud800"]', b'{"\\udfff": 1}', b'["x\\ud83d"]', b'["\\ude00\\ud83d"]', b'{"a": {"b": ["\\uDC00"]}}'],
)
@pytest.mark.parametrize("big", [False, True], ids=["small", "big"])
def test_strictness(mod: ModuleType, data: bytes, big: bool) -> None:
    if big:
        data = data + b" " * (jsonio.BIG + 1)
    with pytest.raises(ValueError):
        mod.loads(data)


def test_long_digit_runs_are_checked_cheaply() -> None:
    ns = b'{"t": 1732870000000000000, "u": 9000000000000000000}'
    assert jsonio._orjson_exact(ns)
    assert jsonio._orjson_exact(b'{"no": "long digit runs", "n": 123456789012345678}')
    assert not jsonio._orjson_exact(b"[9223372036854775808]")
    assert not jsonio._orjson_exact(b'["12345678901234567890"]')  # a string: merely slower
    # A digest's hex with a long run of decimal digits in it is a string, not a number.
    assert jsonio._orjson_exact(b'{"sha": "3a99999999999999999999999999b4", "u": "1e99999999999999999999f"}')
    assert not jsonio._orjson_exact(b'[1e99999999999999999999]')  # an exponent: its word is a number
    assert not jsonio._orjson_exact(b'{"a": -99999999999999999999}')
    assert not jsonio._orjson_exact(b'[0.5e+99999999999999999999]')


# --- what the hot path imports -----------------------------------------------------------------


def test_the_hot_path_does_not_import_re_or_json() -> None:
    code = (
        "import sys\n"
        "before = {'re', 'json'} & set(sys.modules)\n"
        "from resumable.core import jsonio\n"
        "jsonio.loads(jsonio.dumps({'a': [1, 2.5, None, 'é']}))\n"
        "jsonio.dumps_pretty({'a': [1, {}]})\n"
        "print(sorted(({'re', 'json'} & set(sys.modules)) - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_errors_in_a_fresh_interpreter() -> None:
    """The C scanner of Python 3.11 needs json.decoder imported to raise its errors; the first bad
    document of a process must still get the standard library's message."""
    code = (
        "from resumable.core import jsonio\n"
        "for data in (b'{bad', b'[1, 2', b'[1,]', b'', b'[1] x'):\n"
        "    try:\n"
        "        jsonio.loads(data)\n"
        "    except ValueError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = []
    for data in ("{bad", "[1, 2", "[1,]", "", "[1] x"):
        with pytest.raises(json.JSONDecodeError) as exc:
            json.loads(data)
        expected.append(f"JSONDecodeError {exc.value}")
    assert out.splitlines() == expected
