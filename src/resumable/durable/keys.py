"""A step call's identity: ``<step name>:<key>``. Pure.

**Readable keys.** A call whose only argument (its first parameter) is a short ``int`` or ``str``
is keyed by that value as it reads: ``train(7)`` is ``train:7``, ``embed("doc-17")`` is
``embed:doc-17``. Only values that cannot be mistaken for another call's key qualify: an ``int``, or
a string of at most 64 printable characters without spaces, commas or colons that does not read as
an integer (``"7"`` would be taken for ``7``) and does not look like a hashed key (20 lowercase hex
digits). Every other call is hashed, as below. Runs recorded before readable keys existed hold the
hashed id of such calls; a call finds its unit under either (``Step.unit_id``), so their results
are still used.

**Hashed keys.** The first 20 hex digits (80 bits) of the SHA-256 of the canonical JSON of the
arguments, bound to the function's parameter names: ``f(1)`` and ``f(x=1)`` are the same call.
Defaults that were not passed are not part of it, so adding a parameter with a default keeps the
results recorded before. Canonical JSON sorts object keys, prints no spaces, escapes every non-ASCII
character (``\\uXXXX``, lone surrogates included) and prints floats by their shortest repr, which is
the same text on every Python we support (3.11-3.13; ``tests/durable/test_keys.py`` checks the
versions found on the machine against golden keys).

Only values with one JSON form are hashed here: ``None``, ``bool``, ``int``, finite ``float``,
``str``, ``list``/``tuple`` (the same key: JSON has one array type) and ``dict`` with ``str`` keys.
A call with anything else (an array, a dataclass, bytes, NaN) is keyed by its content
(``content``), or refused with ``UnkeyableArguments`` there, never keyed by something unstable such
as ``repr``, which would silently re-run the step on the next run.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from typing import Any

from resumable.core import jsonio
from resumable.core.model import MAX_UNIT_ID, check_unit_id
from resumable.errors import InvalidInputError

KEY_HEX = 20  # 80 bits: a collision among a billion calls of one step is about 1 in a million
READABLE_MAX = 64  # characters of a readable key: longer values are hashed, so ids stay short
_HEX = frozenset("0123456789abcdef")

# The canonical text a call's key is hashed over (core.jsonio: the standard library's exact text).
_ENCODE = jsonio.sorted_ascii_encoder()
_SCALARS = (str, int, float, bool)


class UnkeyableArguments(InvalidInputError, TypeError):
    """A step was called with arguments that have no stable JSON form, and without ``key=``."""


def _why_not_json(value: Any, path: str, depth: int = 0) -> str | None:
    """Why ``value`` has no canonical JSON form, or None. Exact types: a subclass (an enum, a numpy
    scalar) could print the same JSON as a different value, or change its printing between versions."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return None
    if kind is float:
        return None if math.isfinite(value) else f"{path} is {value!r}, which JSON cannot hold"
    if depth > 100:
        return f"{path} is nested deeper than 100 levels"
    if kind is list or kind is tuple:
        for i, item in enumerate(value):
            why = _why_not_json(item, f"{path}[{i}]", depth + 1)
            if why is not None:
                return why
        return None
    if kind is dict:
        for k, item in value.items():
            if type(k) is not str:
                return f"{path} has a {type(k).__name__} key {k!r} (JSON object keys are strings)"
            why = _why_not_json(item, f"{path}[{k!r}]", depth + 1)
            if why is not None:
                return why
        return None
    return f"{path} is a {kind.__module__}.{kind.__qualname__}".replace("builtins.", "")


def canonical(value: Any, what: str = "value") -> str:
    """The canonical JSON text of ``value``; UnkeyableArguments when it has none."""
    why = _why_not_json(value, what)
    if why is not None:
        raise UnkeyableArguments(f"{why}: it has no stable JSON form to key the call by")
    return _encode(value, what)


def _encode(value: Any, what: str) -> str:
    """The canonical JSON text of a value ``_why_not_json`` accepted."""
    try:
        return _ENCODE(value)
    except ValueError as exc:  # e.g. an int beyond the interpreter's digit limit
        raise UnkeyableArguments(f"{what} cannot be written as JSON ({exc})") from exc


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:KEY_HEX]


class Binder:
    """Maps a call's arguments to ``{parameter name: value}``, as Python would bind them, without
    ``inspect.Signature.bind`` on the common path (it costs several microseconds per call, a large
    share of a cache hit's budget)."""

    __slots__ = ("first", "names", "required", "signature", "simple")

    def __init__(self, fn: Any) -> None:
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None  # some builtins: positional arguments only
        params = list(self.signature.parameters.values()) if self.signature is not None else []
        plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD,)
        self.simple = self.signature is not None and all(p.kind in plain for p in params)
        self.names = tuple(p.name for p in params)
        self.first = self.names[0] if self.names else None
        self.required = tuple(p.name for p in params if p.default is inspect.Parameter.empty)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments by name; TypeError for a call the function itself would refuse."""
        if not kwargs and len(args) == 1 and self.simple and len(self.required) <= 1 and self.names:
            return {self.names[0]: args[0]}  # the commonest call, f(x), without the general loop
        if self.simple and len(args) <= len(self.names):
            bound = dict(zip(self.names, args, strict=False))
            for name, value in kwargs.items():
                if name in bound or name not in self.names:
                    break
                bound[name] = value
            else:
                if all(name in bound for name in self.required):
                    return bound
        if self.signature is None:
            if kwargs:
                raise TypeError("this step takes positional arguments only")
            return {"args": list(args)}
        # The general case (and every error message) is Python's own.
        ba = self.signature.bind(*args, **kwargs)
        return dict(ba.arguments)


def arguments_key(bound: dict[str, Any], step: str) -> str:
    """The default key of a call whose arguments are ``bound``."""
    for name, value in bound.items():
        why = _why_not_json(value, f"argument {name!r}")
        if why is not None:
            raise UnkeyableArguments(
                f"step {step}: {why}, which has no stable JSON form to key the call by: give the step"
                f" key= (a function of its arguments returning a str, e.g. key=lambda {name}, ...: ...)")
    # Every value was checked above, and the names are str: the whole needs no second look.
    return digest(_encode(bound, f"step {step}: the arguments"))


def readable_key(value: Any) -> str | None:
    """The key of a call whose only argument is ``value``, as it reads, or None when it must be
    hashed (see the module's doc)."""
    kind = type(value)
    if kind is int:
        # Bounded before str(): an int past the interpreter's digit limit cannot be printed.
        return str(value) if -(10 ** (READABLE_MAX - 1)) < value < 10**READABLE_MAX else None
    if kind is not str or not value or len(value) > READABLE_MAX or not value.isprintable():
        return None  # isprintable() is False for control characters, lone surrogates and most spaces
    if " " in value or "," in value or ":" in value or value.lstrip("-").isdigit():
        return None
    if len(value) == KEY_HEX and _HEX.issuperset(value):
        return None
    text: str = value
    return text


def custom_key(value: Any, step: str) -> str:
    """The key ``key=`` returned: a string or an integer is used as it is (readable ids such as
    ``embed:doc-17``); any other JSON value is hashed."""
    if type(value) is str or type(value) is int:
        text = str(value)
        if not text or "," in text or any(c.isspace() for c in text):
            raise InvalidInputError(
                f"step {step}: key {text[:60]!r} is empty or has commas/whitespace; return a single"
                " token such as 'doc-17' from key=")
        return text
    return digest(canonical(value, f"step {step}: the value key= returned"))


def unit_id(step: str, key: str) -> str:
    uid = f"{step}:{key}"
    if len(uid) > MAX_UNIT_ID:
        raise InvalidInputError(
            f"step {step}: unit id {uid[:40]!r}... is {len(uid)} characters (limit {MAX_UNIT_ID});"
            " return a shorter key from key=, or give the step a shorter name=")
    return uid


def check_step_name(name: str) -> str:
    """A step's name is the first part of its units' ids."""
    check_unit_id(name)
    if len(name) > MAX_UNIT_ID - KEY_HEX - 1:
        raise InvalidInputError(f"step name {name[:40]!r}... is too long; give a shorter name=")
    return name
