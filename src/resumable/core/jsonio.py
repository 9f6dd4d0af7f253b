"""JSON encoding and decoding for the store, tuned for a CLI that starts thousands of times.

Three pieces, each where it wins:

- ``_json``, the C accelerator behind the standard library's ``json``, used directly: its scanner
  for decoding, its compact encoder, its string escaper. The ``json`` package itself compiles
  regular expressions when imported (json.decoder, json.encoder and json.scanner all import
  ``re``, which brings enum, functools and collections), about 6 ms: a quarter of a whole
  ``resumable unit`` call. ``_json`` alone loads in a fraction of a millisecond and is what
  ``json`` runs on anyway, so the results are the standard library's. Where ``_json`` is missing
  (not CPython) the ``json`` package is used, with the same options.
- a small indenting encoder of our own for pretty output, printing exactly what
  ``json.dumps(v, indent=2, ensure_ascii=False)`` and ``JSON.stringify(v, null, 2)`` print (the
  standard library's indenting encoder is pure Python too, unless the C encoder can indent, as
  from Python 3.13, in which case that is used, as ``json`` does);
- ``orjson``, up to several times faster on large documents (numbers, escaped strings; about
  even on a run's units) and far faster at indenting, but whose import pulls in dataclasses,
  inspect, uuid and more (tens of milliseconds), so it is imported only when a document is big.
  It never changes an answer: what it would decode differently (integers beyond 64 bits, lone
  surrogate escapes) goes to the ``_json`` scanner instead.

Control characters: the standard library's escaper (like JSON.stringify) escapes only C0, so DEL
and the C1 controls (U+0080-U+009F; U+009B is a terminal's CSI) would pass through raw, and
`resumable get` or `status --json` on a terminal would hand them to it. Every text ``dumps`` and
``dumps_pretty`` return escapes them too, as ``\\u00XX``, which every JSON reader (jq, JSON.parse,
json.loads) decodes to the same string. ``canonical`` keeps JSON.stringify's exact bytes, for hashes
that must match ulpi's.

All strict: NaN, Infinity, numbers beyond float range, invalid UTF-8, lone surrogate escapes
(``"\\ud800"``: no UTF-8 file can hold the string) and nesting deeper than the
interpreter's recursion limit are decode errors (``ValueError``), never crashes; a duplicate key's
last value wins (as in ``JSON.parse``); encoding refuses NaN and Infinity (``ValueError``) and
non-JSON types (``TypeError``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Above this many bytes, orjson's speed pays for its import.
BIG = 256 * 1024

# JSON's whitespace (json.decoder.WHITESPACE without the regular expression).
_WS = " \t\n\r"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # "1e999" parses to inf, which the encoder (allow_nan=False) then refuses with
    # an uncaught ValueError mid-command; reject it at the boundary like NaN/Infinity.
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _not_serializable(value: Any) -> Any:
    # The encoders' ``default``: json.JSONEncoder.default's refusal, word for word.
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _decode_error(message: str, text: str, pos: int) -> ValueError:
    # Only on a bad document, so importing json (and re) here costs nothing on the hot path; the
    # C scanner raises this same class for the errors it finds itself.
    from json import JSONDecodeError

    return JSONDecodeError(message, text, pos)


try:
    from _json import encode_basestring, make_encoder, make_scanner
except ImportError:  # not CPython: the json package's pure-Python equivalents below
    _HAVE_C = False
else:
    _HAVE_C = True

if _HAVE_C:

    class _ScanOptions:
        """What ``_json.make_scanner`` reads from its context, the attributes a
        ``json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)`` has (the
        scanner copies them once, when it is made)."""

        def __init__(self) -> None:
            self.strict = True  # control characters inside strings are errors
            self.object_hook = None
            self.object_pairs_hook = None  # a plain dict: a duplicate key's last value wins
            self.array_hook = None  # read by the scanner from Python 3.15
            self.parse_float: Callable[[str], float] = _finite_float
            self.parse_int: Callable[[str], int] = int
            self.parse_constant: Callable[[str], Any] = _no_constant
            self.memo: dict[str, str] = {}  # read by the pure-Python scanner only

    # One scanner for the process (it keeps no state between calls). typeshed types the context
    # as a make_scanner itself; the scanner only reads the attributes above.
    _scan = make_scanner(_ScanOptions())  # type: ignore[arg-type]

    def _decode(text: str, /) -> Any:
        """json.JSONDecoder.decode, with the whitespace skipped without a regular expression."""
        start = 0
        if text and text[0] in _WS:
            start = len(text) - len(text.lstrip(_WS))
        try:
            value, end = _scan(text, start)
        except StopIteration as stop:
            raise _decode_error("Expecting value", text, stop.value) from None
        except SystemError:
            # Python 3.11's scanner looks its JSONDecodeError up in sys.modules["json.decoder"]
            # and, when json was never imported, loses the error it meant to raise ("returned NULL
            # without setting an exception"). Only bad documents get here: import json and scan
            # again, which raises the real error.
            import json.decoder  # noqa: F401

            value, end = _scan(text, start)
        if end != len(text):
            rest = text[end:].lstrip(_WS)
            if rest:
                raise _decode_error("Extra data", text, len(text) - len(rest))
        return value

    def _compact(value: Any, /) -> str:
        # A new encoder per call, as json.JSONEncoder.encode makes one: its circular-reference
        # markers must not outlive a failed call or be shared between threads.
        encoder = make_encoder({}, _not_serializable, encode_basestring, None, ":", ",", False, False, False)
        return "".join(encoder(value, 0))

    _escape: Callable[[str], str] = encode_basestring

    def _c_indents() -> bool:
        # From Python 3.13 the C encoder indents (and json.dumps(indent=2) uses it); before, it
        # ignores ``indent``. Asked of the encoder itself rather than of the version number.
        try:
            encoder = make_encoder(None, _not_serializable, encode_basestring, "  ", ": ", ",", False, False, False)
            return "".join(encoder([[], {"": 0}], 0)) == '[\n  [],\n  {\n    "": 0\n  }\n]'
        except (TypeError, ValueError):
            return False

    _C_PRETTY = _c_indents()

else:
    import json

    _decode = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float).decode
    _compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    _escape = json.encoder.py_encode_basestring
    _C_PRETTY = False


# --- pretty printing ---------------------------------------------------------------------------
# json.encoder._make_iterencode's rules with indent=2, ensure_ascii=False, allow_nan=False, written
# as plain recursion appending to one list (the standard library's nests a generator per level).

_float_repr = float.__repr__
_int_repr = int.__repr__


def _float_text(value: float) -> str:
    text = _float_repr(value)
    if text in ("nan", "inf", "-inf"):
        raise ValueError("Out of range float values are not JSON compliant: " + repr(value))
    return text


def _key_text(key: Any) -> str:
    """A key as json.dumps prints it: a string as itself, another scalar as its own text."""
    if isinstance(key, str):
        return key
    text = _scalar_text(key)
    if text is None:
        raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
    return text


def _scalar_text(value: Any) -> str | None:
    """The text of a JSON scalar, None for anything else. Checked in json.encoder's order (bool
    before int: True is an int)."""
    if isinstance(value, str):
        return _escape(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return _int_repr(value)
    if isinstance(value, float):
        return _float_text(value)
    return None


def _pretty_into(out: list[str], value: Any, newline: str, markers: dict[int, Any]) -> None:
    """Append the container ``value`` (or anything not a scalar) to ``out``; ``newline`` is a
    newline plus the current indentation. Scalars inside are written inline, the common case."""
    if isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        mark = id(value)
        if mark in markers:
            raise ValueError("Circular reference detected")
        markers[mark] = value
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            text = _escape(item) if type(item) is str else _scalar_text(item)
            if text is not None:
                out.append(separator + text)
            else:
                out.append(separator)
                _pretty_into(out, item, inner, markers)
            separator = "," + inner
        out.append(newline + "]")
        del markers[mark]
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        mark = id(value)
        if mark in markers:
            raise ValueError("Circular reference detected")
        markers[mark] = value
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            head = separator + _escape(key if type(key) is str else _key_text(key)) + ": "
            text = _escape(item) if type(item) is str else _scalar_text(item)
            if text is not None:
                out.append(head + text)
            else:
                out.append(head)
                _pretty_into(out, item, inner, markers)
            separator = "," + inner
        out.append(newline + "}")
        del markers[mark]
    else:
        _not_serializable(value)


def _pretty_python(value: Any) -> str:
    text = _scalar_text(value)
    if text is not None:
        return text
    out: list[str] = []
    _pretty_into(out, value, "\n", {})
    return "".join(out)


if _C_PRETTY:

    def _pretty(value: Any, /) -> str:
        encoder = make_encoder({}, _not_serializable, encode_basestring, "  ", ": ", ",", False, False, False)
        return "".join(encoder(value, 0))

else:
    _pretty = _pretty_python


# --- big documents -----------------------------------------------------------------------------

_INT64_MAX = 2**63 - 1
# Every digit to b"0" (other bytes unchanged, and none of them is b"0"): 19 digits in a row become
# b"0" * 19, found at the speed of a substring search.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _orjson_exact(data: bytes | bytearray) -> bool:
    """Whether orjson decodes the numbers of ``data`` exactly as the standard scanner does: orjson
    silently turns an integer outside [-2**63, 2**64) into a float. Such an integer has at least
    19 digits in a row (its magnitude is at least 2**63, a 19-digit number starting 92...), so a
    document without 19 digits in a row, nearly any, needs no closer look. A run that is not such
    an integer (the digits of a string or of a float) at worst sends the document to the slower
    scanner, which is exact."""
    # In slices (overlapping by a run's length): a whole-document translation would hold a second
    # copy of a 100-MB snapshot for a moment, the largest allocation of a big run's load.
    step = 1 << 20
    if not any(b"0" * 19 in data[i : i + step + 18].translate(_DIGITS_TO_ZERO) for i in range(0, len(data), step)):
        return True
    zeros = data.translate(_DIGITS_TO_ZERO)
    at = zeros.find(b"0" * 19)
    while at >= 0:
        end = at + 19
        while end < len(zeros) and zeros[end] == 0x30:
            end += 1
        # One below 9 * 10**18 fits in 63 bits (e.g. nanosecond timestamps).
        if (end - at > 19 or int(data[at:end]) > _INT64_MAX) and not _in_word(data, at, end):
            return False
        at = zeros.find(b"0" * 19, end)
    return True


# What a number token is made of, and the letters and digits of a word around it: a run of digits
# whose word holds another letter (the hex digits of a SHA-256, which has 19 decimal digits in a
# row about once in 100 digests) is in a string, never a number. A number is always delimited by
# punctuation or whitespace, so its word is the number itself.
_NUMBER_BYTES = frozenset(b"0123456789eE.+-")
_WORD_BYTES = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+-")


def _in_word(data: bytes | bytearray, start: int, end: int) -> bool:
    """Whether the digits ``data[start:end]`` lie in a word that holds a letter other than e or E
    (so inside a string): the nearest such letter on either side, scanning over word bytes."""
    i = start - 1
    while i >= 0 and data[i] in _WORD_BYTES:
        if data[i] not in _NUMBER_BYTES:
            return True
        i -= 1
    i = end
    while i < len(data) and data[i] in _WORD_BYTES:
        if data[i] not in _NUMBER_BYTES:
            return True
        i += 1
    return False


# --- the interface -----------------------------------------------------------------------------


def loads(data: bytes | bytearray) -> Any:
    """Decode UTF-8 JSON bytes. Raises ValueError (JSONDecodeError, UnicodeDecodeError, nesting
    too deep, NaN/Infinity) for anything that is not strict JSON."""
    if len(data) > BIG and _orjson_exact(data):
        import orjson

        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            # orjson refuses a few documents the standard scanner accepts (a lone surrogate
            # escape such as "\ud800"); the scanner below gives a big document the same answer, or
            # the same error message, as a small one.
            pass
    try:
        value = _decode(data.decode("utf-8"))
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    if b"\\u" in data and (b"\\ud" in data or b"\\uD" in data):
        _refuse_lone_surrogates(value)
    return value


def _refuse_lone_surrogates(value: Any) -> None:
    """A ``\\ud800``-style escape without its pair decodes to a string no UTF-8 file can hold: the
    value could never be stored or printed, so it is a decode error here, not a crash later. Only
    called when the text holds such an escape, so ordinary documents pay nothing."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            strings = [v]
        elif isinstance(v, dict):
            strings = list(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
            continue
        else:
            continue
        for text in strings:
            if not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    bad = text[exc.start]
                    raise ValueError(f"lone surrogate \\u{ord(bad):04x} in a string: not valid Unicode") from None


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces, raw UTF-8 but for control characters), as JSON.stringify prints it
    with DEL and C1 escaped too."""
    data = canonical(value)
    # The test inline (a call fewer), and with ints (a byte search by memchr; a one-byte bytes
    # needle costs ten times as much): this is every journal record's encoding.
    return _escape_controls(data) if 0x7F in data or 0xC2 in data else data


def canonical(value: Any) -> bytes:
    """Compact JSON exactly as JSON.stringify prints it, DEL and C1 raw: what a hash of a value
    shared with ulpi's tools is taken over (``core.events.item_id``). Not for output."""
    if type(value) is dict:
        text = _flat_strings(value)
        if text is not None:
            return text.encode("utf-8")
    try:
        return _compact(value).encode("utf-8")
    except RecursionError as exc:
        raise ValueError("value nested too deeply to encode") from exc


def _escape_controls(data: bytes) -> bytes:
    """``data`` with DEL and the C1 controls escaped as ``\\u00XX``. They can stand only inside
    strings (JSON's own syntax is ASCII without DEL), so escaping them in the finished text is exact.
    In UTF-8, U+0080-U+009F are 0xC2 0x80-0x9F, and 0xC2 is only ever a lead byte: two byte searches
    clear nearly every text."""
    if 0x7F in data:
        data = data.replace(b"\x7f", b"\\u007f")
    if 0xC2 not in data:
        return data
    parts = data.split(b"\xc2")
    out = [parts[0]]
    for part in parts[1:]:
        if part and part[0] < 0xA0:  # a continuation byte after 0xC2 is 0x80-0xBF
            out.append(b"\\u%04x" % part[0] + part[1:])
        else:
            out.append(b"\xc2" + part)
    return b"".join(out)


def _flat_strings(value: dict[Any, Any]) -> str | None:
    """The compact text of an object whose keys and values are all strings (a unit transition's
    event, encoded on every journal append), else None. Joined from the escaper the encoder itself
    uses, so the text is the encoder's, at about a third less cost: no encoder object is built."""
    parts = []
    for key, item in value.items():
        if type(key) is not str or type(item) is not str:
            return None
        parts.append(_escape(key) + ":" + _escape(item))
    return "{" + ",".join(parts) + "}"


def dumps_pretty(value: Any, *, big: bool = False) -> bytes:
    """Two-space indented JSON without a trailing newline, as ``JSON.stringify(v, null, 2)``.
    ``big`` selects orjson (the indenting encoder above is pure Python before Python 3.13)."""
    if big:
        import orjson

        try:
            return _escape_controls(orjson.dumps(value, option=orjson.OPT_INDENT_2))
        except TypeError:
            pass  # integers beyond 64 bits, non-string keys: the encoder above takes them
    try:
        return _escape_controls(_pretty(value).encode("utf-8"))
    except RecursionError as exc:
        raise ValueError("value nested too deeply to encode") from exc


# --- the standard library's text, where a format is not the store's ------------------------------


def string_literal(text: str) -> str:
    """``text`` as a JSON string literal with the standard library's escapes (C0 controls, quote
    and backslash; everything else raw), which are JSON.stringify's but for lone surrogates."""
    return _escape(text)


def stdlib_dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)``: the standard library's exact text, for output that is not
    the store's (a display with ``default=str``, another tool's file). Loads the ``json`` package
    (about 6 ms), so only the commands that print such output pay for it."""
    import json

    return json.dumps(value, **options)


def stdlib_loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads(text, **options)``, for formats that are not the store's (a hook's input,
    another tool's file) and whose readers' options (``parse_constant``...) are their own."""
    import json

    return json.loads(text, **options)


def sorted_ascii_encoder() -> Callable[[Any], str]:
    """An encoder of the standard library's compact, key-sorted, ASCII-only JSON that refuses NaN:
    the text a durable call's key is hashed over, whose bytes must never change. A dict goes
    through the C encoder made once with no circular-reference markers (a call's caller refuses a
    value that holds itself, as nested too deep, before it is encoded), a fifth of ``encode``'s
    cost on the hot path of every durable call."""
    import json

    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    c_encode = make(None, encoder.default, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, False)

    def encode(value: Any) -> str:
        if type(value) is dict:
            return "".join(c_encode(value, 0))
        return encoder.encode(value)

    return encode
