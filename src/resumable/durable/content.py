"""Keys of arguments JSON cannot hold: numpy arrays, pandas objects, dataclasses, attrs and pydantic
models, bytes, paths, enums, sets, dates, and objects that declare their key.

A call whose arguments are all plain JSON keeps the key ``keys`` gives it (the hash of their
canonical JSON), so nothing recorded before changes. A call with any other value is keyed here:
every value becomes a *normal form*, a JSON tree in which each value JSON cannot hold is a list
headed by a tag (a string that starts with NUL, such as ``"\\u0000ndarray"``), and the key is the
SHA-256 of ``KEY_FORMAT``, a newline and the tree's canonical JSON (the same encoder as plain keys).
A plain JSON text never starts with that prefix, and a string of the caller's that starts with NUL
gets a second one, so no two different calls share a normal form. The rules, value by value, are
in ``docs/durable.md`` (Arguments keyed by content); each has a golden key in
``tests/durable/test_content_keys.py``, so a change of any rule fails a test.

Large binary content (an array's bytes, ``bytes``, a file) is hashed with SHA-256 straight from its
memory, without a copy when the array is C-contiguous; hashlib releases the interpreter lock while
it hashes. numpy, pandas, attrs and pydantic are never imported here: a value is one of theirs only
if its package is already loaded (``sys.modules``), since no such value exists otherwise.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import stat
import sys
from typing import Any

from resumable import fsio
from resumable.core import jsonio
from resumable.durable.keys import KEY_HEX, UnkeyableArguments, arguments_key
from resumable.durable.keys import custom_key as keys_custom_key

KEY_FORMAT = "resumable-key/2"  # the first line of every hashed normal form; never a JSON text's start
TAG = "\x00"
MAX_DEPTH = 100
PATH_MODES = ("name", "content")
_ENCODE = jsonio.sorted_ascii_encoder()
_CHUNK = 1 << 20


class Normalizer:
    """Turns values into their normal forms; ``paths``: "name" (a path by its text) or "content"
    (a path by the bytes of the file, or the tree, it names)."""

    __slots__ = ("paths",)

    def __init__(self, paths: str = "name") -> None:
        self.paths = paths

    def norm(self, value: Any, where: str, depth: int = 0) -> Any:
        kind = type(value)
        if value is None or kind is bool or kind is int:
            return value
        if kind is str:
            return TAG + value if value.startswith(TAG) else value
        if kind is float:
            return value if math.isfinite(value) else [TAG + "float", repr(value)]
        if depth > MAX_DEPTH:
            raise UnkeyableArguments(f"{where} is nested deeper than {MAX_DEPTH} levels")
        if kind is list or kind is tuple:
            return [self.norm(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
        if kind is dict:
            return self.mapping(value, where, depth)
        return self.special(value, where, depth)

    def mapping(self, value: dict[Any, Any], where: str, depth: int) -> Any:
        if all(type(k) is str for k in value):
            return {k: self.norm(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
        pairs = [(self.norm(k, f"{where} key {k!r}", depth + 1), self.norm(v, f"{where}[{k!r}]", depth + 1))
                 for k, v in value.items()]
        return [TAG + "dict", [[k, v] for _, k, v in sorted((_ENCODE(k), k, v) for k, v in pairs)]]

    def special(self, value: Any, where: str, depth: int) -> Any:
        kind = type(value)
        declared = getattr(kind, "__resumable_key__", None)
        if callable(declared):
            return [TAG + "object", kind.__qualname__,
                    self.norm(declared(value), f"{where}.__resumable_key__()", depth + 1)]
        for module, handler in _HANDLERS:
            if module is None or module in sys.modules:
                found = handler(self, value, where, depth)
                if found is not _NO:
                    return found
        raise UnkeyableArguments(
            f"{where} is a {_type_name(kind)}, which has no content key: give its class a __resumable_key__"
            " method returning what identifies it (plain data), or give the step key=")


_NO = object()  # a handler's "not mine"


def _type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}".replace("builtins.", "")


def _fields(n: Normalizer, value: Any, names: list[str], where: str, depth: int) -> dict[str, Any]:
    return {name: n.norm(getattr(value, name), f"{where}.{name}", depth + 1) for name in names}


def _enum(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    import enum

    if isinstance(value, enum.Enum):
        return [TAG + "enum", type(value).__qualname__, n.norm(value.value, f"{where}.value", depth + 1)]
    return _NO


def _numpy(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    np: Any = sys.modules["numpy"]
    if isinstance(value, np.ndarray):
        return array_form(np, value, where, n, depth)
    if isinstance(value, np.generic):
        scalar = np.asarray(value)
        return [TAG + "npscalar", _descr(np, scalar.dtype, where), scalar.tobytes().hex()]
    return _NO


def _descr(np: Any, dtype: Any, where: str) -> Any:
    """The dtype as the .npy format writes it (byte order included), as JSON."""
    if dtype.hasobject:
        raise UnkeyableArguments(f"{where} has a dtype holding Python objects ({dtype}) inside a record")
    descr = np.lib.format.dtype_to_descr(dtype)

    def plain(d: Any) -> Any:
        return [plain(x) for x in d] if isinstance(d, list | tuple) else d

    return plain(descr)


def array_form(np: Any, a: Any, where: str, n: Normalizer, depth: int) -> Any:
    """An array by its dtype, shape and bytes in C order (an array of objects by its items)."""
    if type(a) is not np.ndarray and not isinstance(a, np.memmap):
        raise UnkeyableArguments(f"{where} is a {_type_name(type(a))} (an ndarray subclass, with more than its"
                                 " values): give the step key=, or pass np.asarray(...)")
    shape = list(a.shape)
    if a.dtype == object:
        return [TAG + "ndarray", "|O", shape, n.norm(a.tolist(), where, depth + 1)]
    descr = _descr(np, a.dtype, where)
    contiguous = a if a.flags.c_contiguous else np.ascontiguousarray(a)
    h = hashlib.sha256()
    if a.size and a.dtype.itemsize:
        h.update(contiguous.reshape(-1).view(np.uint8))
    return [TAG + "ndarray", descr, shape, h.hexdigest()]


def _pandas(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    pd: Any = sys.modules["pandas"]
    if isinstance(value, pd.DataFrame):
        columns = [_values(n, pd, value.iloc[:, i], f"{where} column {i}", depth) for i in range(value.shape[1])]
        return [TAG + "pandas.DataFrame", _index(n, pd, value.columns, f"{where}.columns", depth),
                _index(n, pd, value.index, f"{where}.index", depth), columns]
    if isinstance(value, pd.Series):
        return [TAG + "pandas.Series", n.norm(value.name, f"{where}.name", depth + 1),
                _index(n, pd, value.index, f"{where}.index", depth), _values(n, pd, value, where, depth)]
    if isinstance(value, pd.Index):
        return _index(n, pd, value, where, depth)
    if value is pd.NA:
        return [TAG + "pandas.NA"]
    if value is pd.NaT:
        return [TAG + "pandas.NaT"]
    return _NO


def _index(n: Normalizer, pd: Any, ix: Any, where: str, depth: int) -> Any:
    return [TAG + "pandas.Index", type(ix).__name__, n.norm(list(ix.names), f"{where}.names", depth + 1),
            _values(n, pd, ix, where, depth)]


def _values(n: Normalizer, pd: Any, values: Any, where: str, depth: int) -> Any:
    """A Series' or an Index's values: by their bytes when numpy holds them, else item by item."""
    np: Any = sys.modules["numpy"]
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and not dtype.hasobject and not isinstance(values, pd.MultiIndex):
        return [str(dtype), array_form(np, np.asarray(values), where, n, depth)]
    if isinstance(dtype, pd.CategoricalDtype):
        codes = np.asarray(values.cat.codes if isinstance(values, pd.Series) else values.codes)
        return ["category", _index(n, pd, dtype.categories, f"{where} categories", depth), bool(dtype.ordered),
                array_form(np, codes, where, n, depth)]
    items = list(values)
    label = str(dtype)
    if (label in ("object", "str", "string")) and all(type(v) is str for v in items):
        label = "str"  # strings whatever pandas calls their dtype (object in pandas 2, str in pandas 3)
    return [label, n.norm(items, where, depth + 1)]


def _dataclass(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value) if f.compare]
        return [TAG + "dataclass", type(value).__qualname__, _fields(n, value, names, where, depth)]
    return _NO


def _attrs(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    attr: Any = sys.modules["attr"]
    if attr.has(type(value)):
        names = [a.name for a in attr.fields(type(value)) if a.eq]
        return [TAG + "attrs", type(value).__qualname__, _fields(n, value, names, where, depth)]
    return _NO


def _pydantic(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    pydantic: Any = sys.modules["pydantic"]
    if isinstance(value, pydantic.BaseModel):
        fields = _fields(n, value, list(type(value).model_fields), where, depth)
        extra = value.__pydantic_extra__ or {}
        out = [TAG + "pydantic", type(value).__qualname__, fields]
        if extra:
            out.append(n.norm(dict(extra), f"{where} extra fields", depth + 1))
        return out
    return _NO


def _builtin(n: Normalizer, value: Any, where: str, depth: int) -> Any:
    import datetime
    import decimal
    import pathlib
    import uuid

    if isinstance(value, bytes | bytearray | memoryview):
        return [TAG + "bytes", hashlib.sha256(value).hexdigest()]
    if isinstance(value, pathlib.PurePath):
        if n.paths == "content":
            return file_form(value, where)
        return [TAG + "path", value.as_posix()]
    if isinstance(value, set | frozenset):
        items = [n.norm(v, f"{where} item", depth + 1) for v in value]
        return [TAG + "set", [v for _, v in sorted(((_ENCODE(v), v) for v in items), key=lambda p: p[0])]]
    for kind in (datetime.datetime, datetime.date, datetime.time):  # a datetime is a date: first
        if isinstance(value, kind):  # a subclass (pandas' Timestamp) as its base
            return [TAG + kind.__name__, value.isoformat()]
    if isinstance(value, datetime.timedelta):
        return [TAG + "timedelta", value.days, value.seconds, value.microseconds]
    if isinstance(value, decimal.Decimal):
        return [TAG + "decimal", str(value)]
    if isinstance(value, uuid.UUID):
        return [TAG + "uuid", str(value)]
    if type(value) is complex:
        return [TAG + "complex", n.norm(value.real, where, depth + 1), n.norm(value.imag, where, depth + 1)]
    if isinstance(value, type):
        return [TAG + "type", value.__qualname__]
    return _NO


# Checked in this order; a handler whose package is not loaded is skipped (None: always checked).
_HANDLERS: tuple[tuple[str | None, Any], ...] = (
    ("enum", _enum), ("numpy", _numpy), ("pandas", _pandas), ("dataclasses", _dataclass), ("attr", _attrs),
    ("pydantic", _pydantic), (None, _builtin),
)


def file_form(path: Any, where: str) -> list[Any]:
    """A path by its content: a file's bytes, or a directory's tree (names, links' targets, files'
    bytes; links are not followed inside it). Opened without blocking (``fsio``): a FIFO, a socket
    or a device (a link to /dev/zero included) is refused, never read."""
    text = os.fspath(path)
    try:
        is_dir = stat.S_ISDIR(os.stat(text).st_mode)  # the path you gave may be a link: it is yours
        fd = fsio.open_dir(os.path.realpath(text)) if is_dir else fsio.open_regular(text, os.O_RDONLY, follow=True)
    except OSError as exc:
        raise _unreadable(where, text, exc) from None
    try:
        return [TAG + "tree", _tree(fd, where)] if is_dir else [TAG + "file", _digest_fd(fd)]
    finally:
        os.close(fd)


def _unreadable(where: str, path: str, exc: OSError) -> UnkeyableArguments:
    if exc.strerror == fsio.NOT_REGULAR or exc.errno == errno.ELOOP:
        return UnkeyableArguments(f"{where} ({path}) is not a regular file or a directory: it cannot be keyed"
                                  " by content")
    return UnkeyableArguments(f"{where}: cannot read {path} to key it by content ({exc.strerror})")


def _digest_fd(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        h.update(chunk)
    return h.hexdigest()


def _tree(dir_fd: int, where: str, prefix: str = "") -> list[list[str]]:
    out: list[list[str]] = []
    for entry in sorted(os.scandir(dir_fd), key=lambda e: e.name):
        name = prefix + entry.name
        try:
            if entry.is_symlink():
                out.append([name, "link", os.readlink(entry.name, dir_fd=dir_fd)])
                continue
            if entry.is_dir(follow_symlinks=False):
                fd = fsio.open_dir(entry.name, dir_fd=dir_fd)
                try:
                    out += [[name, "dir", ""], *_tree(fd, where, name + "/")]
                finally:
                    os.close(fd)
                continue
            fd = fsio.open_regular(entry.name, os.O_RDONLY, dir_fd=dir_fd)
        except OSError as exc:
            raise _unreadable(where, name, exc) from None
        try:
            out.append([name, "file", _digest_fd(fd)])
        finally:
            os.close(fd)
    return out


def normal_text(tree: Any) -> str:
    return _ENCODE(tree)


def extended_key(tree: Any) -> str:
    """The key of a call whose arguments' normal form is ``tree``."""
    text = f"{KEY_FORMAT}\n{_ENCODE(tree)}"
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:KEY_HEX]


def call_key(bound: dict[str, Any], step: str, paths: str = "name") -> str:
    """The default key of a call whose arguments are ``bound``: their JSON's hash when they are all
    plain JSON (``keys.arguments_key``, as before), else the hash of their normal form."""
    try:
        return arguments_key(bound, step)
    except UnkeyableArguments:
        pass
    n = Normalizer(paths)
    try:
        tree = {name: n.norm(value, f"argument {name!r}") for name, value in bound.items()}
    except UnkeyableArguments as exc:
        raise UnkeyableArguments(f"step {step}: {exc}") from None
    return extended_key(tree)


def custom_key(value: Any, step: str, paths: str = "name") -> str:
    """The key ``key=`` returned: a str or an int as it is (``keys.custom_key``), plain JSON hashed as
    before, anything else by its normal form."""
    if type(value) is str or type(value) is int:
        return keys_custom_key(value, step)
    try:
        return keys_custom_key(value, step)
    except UnkeyableArguments:
        pass
    try:
        tree = Normalizer(paths).norm(value, "the value key= returned")
    except UnkeyableArguments as exc:
        raise UnkeyableArguments(f"step {step}: {exc}") from None
    return extended_key([TAG + "key", tree])
