"""A step's result as the run stores it, and back; a failure as the run stores it.

A result is one unit field, ``result``, replaced whole by every new result, in the first format that
holds the value exactly:

    {"codec": "json", "value": <the JSON value>}          in the document, up to 64 KiB encoded
    {"codec": "json", "ref": "sha256:<hex>", "size": N}    larger: a content-addressed blob
    {"codec": "npy" | "parquet" | "tree", "v": 2, ...}     arrays, frames, dataclasses (``formats``)
    {"codec": "pickle", "b64": "<base64>"}                 pickle, when allowed, or another
    {"codec": "pickle", "ref": "sha256:<hex>", "size": N}  serializer: bytes, inline or in a blob

JSON is the default: what the document can hold, readable with ``jq``. A call returns what a later
run's cache hit would return (the value decoded from what was stored), so the first run and a resumed
one see the same types: a tuple comes back as a list, a dict's int keys as strings. A value JSON
cannot hold goes to ``formats`` (.npy, Parquet, a tree of those and dataclass fields), then to pickle
if the step or the run allows it; otherwise the call fails, saying what it returned and what to do.

Unpickling runs code chosen by whoever wrote the bytes: a pickled result is read only when the store
says nobody else could have written it (``RunHandle``'s ``Provenance``: a runs directory, the run's
files and the blob owned by this user and writable by nobody else); otherwise reading it is refused.
"""

from __future__ import annotations

import base64
import traceback
from typing import Any, Protocol

from resumable.core import jsonio
from resumable.durable import formats
from resumable.errors import CorruptRunError, InvalidInputError, NewerFormatError, RefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.core.types import StepError, StoredResult

INLINE_LIMIT = 64 * 1024  # encoded results above this go to a blob (handle.put_blob)
_TRACEBACK_CHARS = 4000


class Serializer(Protocol):
    """A custom serializer: ``serializer=MySerializer()`` on the decorator."""

    name: str

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class _Pickle:
    name = "pickle"

    def dumps(self, value: Any) -> bytes:
        import pickle

        # A fixed protocol: results written by 3.11 must load on 3.13 and back.
        return pickle.dumps(value, protocol=5)

    def loads(self, data: bytes) -> Any:
        import pickle

        return pickle.loads(data)  # trusted runs directories only (see the module doc)


PICKLE = _Pickle()


def serializer_of(choice: object) -> Serializer | None:
    """None for JSON (the default); the pickle serializer; or a user's object."""
    if choice is None or choice == "json":
        return None
    if choice == "pickle":
        return PICKLE
    if isinstance(choice, str):
        raise InvalidInputError(f"unknown serializer {choice!r}: use 'json', 'pickle' or an object with"
                                " name, dumps(value) -> bytes and loads(bytes)")
    name = getattr(choice, "name", None)
    if not (isinstance(name, str) and name and name != "json" and callable(getattr(choice, "dumps", None))
            and callable(getattr(choice, "loads", None))):
        raise InvalidInputError("a serializer needs a name (not 'json'), dumps(value) -> bytes and"
                                " loads(bytes) -> value")
    ser: Serializer = choice  # type: ignore[assignment]
    return ser


class Blobs(Protocol):
    def put_blob(self, data: bytes) -> str: ...
    def get_blob(self, ref: str) -> bytes: ...
    def pickle_problem(self, ref: str | None) -> str | None:
        """Why a pickle read from the run (its records, and the blob ``ref``) may hold bytes someone
        else wrote, or None."""
        ...


def encode(value: Any, serializer: Serializer | None, blobs: Blobs, step: str, *,
           allow_pickle: bool = False) -> tuple[StoredResult, Any, int]:
    """(the ``result`` field to record, the value the call returns, a bound on how deep the field
    nests). Blobs are stored here, before the record that names them is committed. A JSON text of n
    characters nests at most n // 2 levels (each level opens and closes a bracket)."""
    if serializer is None:
        try:
            data = jsonio.dumps(value)
        except (TypeError, ValueError):
            return typed(value, blobs, step, allow_pickle)
        stored = jsonio.loads(data)
        # JSON object keys are strings: {1: "a", "1": "b"} is written with the key "1" twice, and read
        # back with one of them. Such a text never survives a round trip at its length.
        if len(jsonio.dumps(stored)) != len(data):
            return typed(value, blobs, step, allow_pickle)
        if len(data) > INLINE_LIMIT:
            return {"codec": "json", "ref": blobs.put_blob(data), "size": len(data)}, stored, 1
        # Two decodings: the document keeps one, the caller gets its own to change as it likes.
        return {"codec": "json", "value": stored}, jsonio.loads(data), 1 + len(data) // 2
    return serialized(value, serializer, blobs, step)


def serialized(value: Any, serializer: Serializer, blobs: Blobs, step: str) -> tuple[StoredResult, Any, int]:
    try:
        raw = serializer.dumps(value)
    except Exception as exc:
        raise InvalidInputError(f"step {step}: serializer {serializer.name!r} cannot store the result"
                                f" ({type(exc).__name__}: {exc})") from exc
    if not isinstance(raw, bytes):
        raise InvalidInputError(f"serializer {serializer.name!r} returned {type(raw).__name__}, not bytes")
    if len(raw) > INLINE_LIMIT * 3 // 4:  # base64 grows it by a third
        field: StoredResult = {"codec": serializer.name, "ref": blobs.put_blob(raw), "size": len(raw)}
    else:
        field = {"codec": serializer.name, "b64": base64.b64encode(raw).decode("ascii")}
    return field, serializer.loads(raw), 1


def typed(value: Any, blobs: Blobs, step: str, allow_pickle: bool) -> tuple[StoredResult, Any, int]:
    """A value JSON does not hold exactly, in the format that does (``formats``), else pickled when
    allowed, else the call's failure."""
    from collections.abc import Iterator

    if isinstance(value, Iterator):
        raise InvalidInputError(
            f"step {step} returned a {formats.type_name(value)}, an iterator: its items are made only as it"
            " is read, so nothing could be stored; return a list of them (return list(...))")
    writer = formats.Writer(blobs.put_blob)
    try:
        field: Any = writer.encode(value)
    except formats.NotHeld as why:
        if allow_pickle:
            return serialized(value, PICKLE, blobs, step)
        what = why.what if why.where == "result" else f"a value whose {why.where} is {why.what}"
        raise InvalidInputError(
            f"step {step} returned {what}, which no format it may use holds exactly (JSON, .npy, Parquet,"
            " dataclass fields): return plain data, arrays, frames or dataclasses, or let the step pickle it"
            " with @run.step(allow_pickle=True)") from None
    reader = formats.Reader(lambda ref: writer.parts.get(ref) or blobs.get_blob(ref), f"step {step}")
    inline = field.get("value")
    depth = 2 + len(jsonio.dumps(inline)) // 2 if inline is not None else 2
    return field, reader.decode(field), depth


def colliding_keys(value: Any) -> str:
    """Where ``value`` holds a dict with two keys that JSON writes alike (said in an error)."""
    todo: list[tuple[str, Any]] = [("a result", value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, dict):
            seen: dict[bytes, Any] = {}
            for k, v in item.items():
                text = jsonio.dumps({k: None})  # the key as the encoder writes it
                if text in seen:
                    return f"{path} with keys {seen[text]!r} and {k!r}, which JSON writes alike"
                seen[text] = k
                todo.append((f"{path}[{k!r}]", v))
        elif isinstance(item, list | tuple):
            todo += [(f"{path}[{i}]", v) for i, v in enumerate(item)]
    return "a result with two keys that JSON writes alike"


# Result records written by a newer resumable carry a higher "v" (this version writes none, meaning
# 1): they are refused, never taken for "another serializer" and overwritten by a re-run.
RESULT_FORMAT = formats.FORMAT
_TYPED = frozenset({"json", "npy", "parquet", "tree"})


def decodable(field: object, serializer: Serializer | None, allow_pickle: bool = False) -> bool:
    """Whether a recorded result can be read back by a step with this serializer: JSON and the typed
    formats always, a pickle when the step allows pickle, and what the step's own serializer wrote. A
    result written by another serializer runs the step again."""
    if not isinstance(field, dict):
        return False
    version = field.get("v", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version > RESULT_FORMAT:
        raise NewerFormatError(f"a recorded step result has format {version}, this resumable reads up to"
                               f" {RESULT_FORMAT}: it was written by a newer resumable; upgrade to read it")
    codec = field.get("codec")
    return codec in _TYPED or (serializer is not None and codec == serializer.name) \
        or (allow_pickle and codec == PICKLE.name)


def fresh_copy(value: Any) -> Any:
    """A copy of a JSON value the document holds, for a caller to change as it likes. orjson's round
    trip is the fastest copy there is (a tenth of the standard library's); what it does not write
    (integers beyond 64 bits, lone surrogates) goes through the standard library's."""
    import orjson

    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:  # orjson.JSONEncodeError
        return jsonio.loads(jsonio.dumps(value))


def decode(field: Mapping[str, Any], serializer: Serializer | None, blobs: Blobs, where: str, *,
           copy: bool = True) -> Any:
    """The value a recorded result holds (a fresh copy every time; ``copy=False``: the field's own
    value, for a field nothing else holds)."""
    codec = field.get("codec")
    ref = field.get("ref")
    if codec == "json":
        if isinstance(ref, str):
            data = blobs.get_blob(ref)
        else:
            if "value" not in field:
                raise CorruptRunError(f"{where}: its recorded result has neither value nor ref")
            return fresh_copy(field["value"]) if copy else field["value"]
        try:
            return jsonio.loads(data)
        except ValueError as exc:
            raise CorruptRunError(f"{where}: its recorded result is not valid JSON ({exc})") from exc
    if codec != "json" and codec in _TYPED:
        return formats.Reader(blobs.get_blob, where).decode(field)
    if codec == PICKLE.name:
        problem = blobs.pickle_problem(ref if isinstance(ref, str) else None)
        if problem is not None:
            raise RefusedError(f"{where}: its recorded result is a pickle, and {problem}: unpickling runs code,"
                               " so it is read only from a store nobody else can write to")
        serializer = PICKLE if serializer is None or serializer.name != PICKLE.name else serializer
    assert serializer is not None and codec == serializer.name
    if isinstance(ref, str):
        raw = blobs.get_blob(ref)
    else:
        b64 = field.get("b64")
        if not isinstance(b64, str):
            raise CorruptRunError(f"{where}: its recorded result has neither b64 nor ref")
        raw = base64.b64decode(b64.encode("ascii"))
    return serializer.loads(raw)


def error_record(exc: BaseException) -> StepError:
    """What is kept of an exception: its type, message and the end of its traceback."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    text = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
    return {"type": name, "message": str(exc)[:2000], "traceback": text[-_TRACEBACK_CHARS:]}


def error_line(record: Mapping[str, Any]) -> str:
    message = " ".join(str(record.get("message", "")).split())
    return f"{record.get('type', 'Exception')}: {message}"[:200] if message else str(record.get("type"))
