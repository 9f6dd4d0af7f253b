"""Results JSON cannot hold, in the format that fits them, read back exactly or not stored at all.

    {"codec": "npy", "v": 2, "dtype": "<f8", "shape": [3], "b64" | "ref": ...}   a numpy array: .npy
    {"codec": "parquet", "v": 2, "kind": "frame" | "series", "b64" | "ref": ...} a pandas DataFrame
                                                                                  or Series: Parquet
    {"codec": "tree", "v": 2, "value": <JSON with nodes>} | {..., "ref": ...}     anything made of
        JSON values, arrays, frames, dataclasses, attrs and pydantic models, bytes and paths

A node of a tree is an object with a ``"$"`` key naming its kind (``npy``, ``parquet``,
``dataclass``, ``attrs``, ``pydantic``, ``npscalar``, ``bytes``, ``path``, ``float`` for NaN and
the infinities, ``map`` for a dict with non-string keys, ``dict`` for one of the caller's dicts that
has a ``"$"`` key itself). Lists and tuples come back as lists, as from JSON. ``.npy`` bytes are
written and read with ``allow_pickle=False``; Parquet needs pyarrow. A class (dataclass, attrs,
pydantic) is named ``module:qualname`` and found again only among the modules already imported
(``sys.modules``): reading a result never imports a module a record names.

Every encoding is checked by reading it back before it is recorded (which is also the value the call
returns, so a first run and a resumed one see the same thing): a value a format would change (an
array of Python objects, a frame Parquet would alter, a dataclass with attributes beyond its fields,
a class defined inside a function) is ``NotHeld``, and the caller falls back to pickle if the step
allows it, else fails the call saying what and how to fix it.
"""

from __future__ import annotations

import base64
import io
import math
import sys
from typing import Any

from resumable.core import jsonio
from resumable.errors import CorruptRunError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

FORMAT = 2  # the "v" of these records: a resumable that reads up to 1 refuses them (not "another serializer")
INLINE_PART = 4096  # bytes of an array or a frame kept in the record (base64) rather than in a blob
INLINE_TREE = 64 * 1024  # a tree's JSON above this goes to a blob
MAX_DEPTH = 100


class NotHeld(Exception):
    """No format here holds the value exactly: ``where`` in the result (``result``, ``result[2].x``)
    and ``what`` is there (``a set``), which may end with what would make it storable."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where} is {what}")
        self.where = where
        self.what = what


def type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}".replace("builtins.", "")


class Writer:
    """Encodes one result; ``put`` stores a part's bytes (a blob), ``parts`` keeps what was stored so
    that reading the record back right away needs no read of the store."""

    def __init__(self, put: Callable[[bytes], str]) -> None:
        self.put = put
        self.parts: dict[str, bytes] = {}

    def bytes_field(self, data: bytes) -> dict[str, Any]:
        if len(data) <= INLINE_PART:
            return {"b64": base64.b64encode(data).decode("ascii")}
        ref = self.put(data)
        self.parts[ref] = data
        return {"ref": ref, "size": len(data)}

    # -- top level --
    def encode(self, value: Any) -> dict[str, Any]:
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, np.ndarray):
            return {"codec": "npy", "v": FORMAT, **self.array(np, value, "result")}
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(value, pd.DataFrame | pd.Series):
            return {"codec": "parquet", "v": FORMAT, **self.frame(pd, value, "result")}
        tree = self.node(value, "result", 0)
        data = jsonio.dumps(tree)
        if len(data) > INLINE_TREE:
            ref = self.put(data)
            self.parts[ref] = data
            return {"codec": "tree", "v": FORMAT, "ref": ref, "size": len(data)}
        return {"codec": "tree", "v": FORMAT, "value": tree}

    # -- nodes --
    def node(self, value: Any, where: str, depth: int) -> Any:
        kind = type(value)
        if value is None or kind is bool or kind is int or kind is str:
            return value
        if kind is float:
            return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
        if depth > MAX_DEPTH:
            raise NotHeld(where, f"nested deeper than {MAX_DEPTH} levels")
        if kind is list or kind is tuple:
            return [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        if kind is dict:
            return self.mapping(value, where, depth)
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, np.ndarray):
            return {"$": "npy", **self.array(np, value, where)}
        if np is not None and isinstance(value, np.generic) and not isinstance(value, np.object_):
            scalar = np.asarray(value)
            if scalar.dtype.hasobject:
                raise NotHeld(where, "a numpy scalar of Python objects")
            return {"$": "npscalar", "dtype": scalar.dtype.str if not scalar.dtype.names else _descr(np, scalar),
                    "hex": scalar.tobytes().hex()}
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(value, pd.DataFrame | pd.Series):
            return {"$": "parquet", **self.frame(pd, value, where)}
        if kind is bytes:
            return {"$": "bytes", "b64": base64.b64encode(value).decode("ascii")}
        made = self.record(value, where, depth)
        if made is not None:
            return made
        pathlib = sys.modules.get("pathlib")
        if pathlib is not None and isinstance(value, pathlib.PurePath) \
                and getattr(pathlib, kind.__name__, None) is kind:
            return {"$": "path", "class": kind.__name__, "value": str(value)}
        raise NotHeld(where, f"a {type_name(value)}")

    def mapping(self, value: dict[Any, Any], where: str, depth: int) -> Any:
        if all(type(k) is str for k in value):
            out = {k: self.node(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
            return {"$": "dict", "value": out} if "$" in value else out
        items = []
        for k, v in value.items():
            if not (k is None or type(k) in (bool, int, float, str)):
                raise NotHeld(where, f"a dict with a {type_name(k)} key")
            items.append([self.node(k, f"{where} key {k!r}", depth + 1), self.node(v, f"{where}[{k!r}]", depth + 1)])
        return {"$": "map", "items": items}

    def record(self, value: Any, where: str, depth: int) -> dict[str, Any] | None:
        """A dataclass, attrs or pydantic instance by its class and fields; None for anything else."""
        kind = type(value)
        dataclasses = sys.modules.get("dataclasses")
        attr = sys.modules.get("attr")
        pydantic = sys.modules.get("pydantic")
        if dataclasses is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
            tag, names = "dataclass", [f.name for f in dataclasses.fields(value)]
        elif attr is not None and attr.has(kind):
            tag, names = "attrs", [a.name for a in attr.fields(kind)]
        elif pydantic is not None and isinstance(value, pydantic.BaseModel):
            if value.__pydantic_private__:
                raise NotHeld(where, f"a {type_name(value)} with private attributes")
            fields = {k: self.node(v, f"{where}.{k}", depth + 1) for k, v in value.__dict__.items()}
            extra = value.__pydantic_extra__ or {}
            out: dict[str, Any] = {"$": "pydantic", "class": class_ref(kind, where), "fields": fields,
                                   "set": sorted(value.model_fields_set)}
            if extra:
                out["extra"] = {k: self.node(v, f"{where}.{k}", depth + 1) for k, v in extra.items()}
            return out
        else:
            return None
        own = getattr(value, "__dict__", None)
        if own is not None and set(own) - set(names):
            extra_names = ", ".join(sorted(set(own) - set(names))[:3])
            raise NotHeld(where, f"a {type_name(value)} with attributes that are not fields ({extra_names})")
        return {"$": tag, "class": class_ref(kind, where),
                "fields": {name: self.node(getattr(value, name), f"{where}.{name}", depth + 1) for name in names}}

    # -- parts --
    def array(self, np: Any, a: Any, where: str) -> dict[str, Any]:
        if type(a) is not np.ndarray and not isinstance(a, np.memmap):
            raise NotHeld(where, f"a {type_name(a)} (an ndarray subclass, with more than its values)")
        if a.dtype.hasobject:
            raise NotHeld(where, f"a numpy array of dtype {a.dtype}, holding Python objects")
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        return {"dtype": a.dtype.str if not a.dtype.names else _descr(np, a), "shape": list(a.shape),
                **self.bytes_field(buf.getvalue())}

    def frame(self, pd: Any, value: Any, where: str) -> dict[str, Any]:
        if not parquet_available():
            raise NotHeld(where, f"a pandas {type(value).__name__}, stored as Parquet only with pyarrow"
                                 " installed (pip install pyarrow)")
        series = isinstance(value, pd.Series)
        frame = value.to_frame(name="values") if series else value
        buf = io.BytesIO()
        try:
            frame.to_parquet(buf, engine="pyarrow")
        except Exception as exc:  # pyarrow cannot type a column (mixed objects) & co.
            raise NotHeld(where, f"a pandas {type(value).__name__} that Parquet cannot hold"
                                 f" ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
        out: dict[str, Any] = {"kind": "series" if series else "frame", **self.bytes_field(buf.getvalue())}
        if series:
            out["name"] = self.node(value.name, f"{where}.name", 1)
        back = read_frame(pd, out, self.parts.get)
        if not same_frames(pd, value, back):
            raise NotHeld(where, f"a pandas {type(value).__name__} that Parquet would not give back exactly"
                                 " (its index, dtypes or attrs)")
        return out


def _descr(np: Any, a: Any) -> Any:
    descr = np.lib.format.dtype_to_descr(a.dtype)

    def plain(d: Any) -> Any:
        return [plain(x) for x in d] if isinstance(d, list | tuple) else d

    return plain(descr)


def parquet_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def class_ref(kind: type, where: str) -> str:
    """``module:qualname`` of a class that can be found again by that name in this process."""
    ref = f"{kind.__module__}:{kind.__qualname__}"
    if find_class(ref) is not kind:
        raise NotHeld(where, f"a {type_name(kind)}, a class defined where it cannot be found by name (inside a"
                             " function, or replaced since): define it at the top level of a module")
    return ref


def find_class(ref: str) -> Any:
    """The class ``ref`` names among the modules already imported; None when there is none."""
    module_name, _, qualname = ref.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        if found is None or part.startswith("<"):
            return None
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


def same_frames(pd: Any, a: Any, b: Any) -> bool:
    check = pd.testing.assert_series_equal if isinstance(a, pd.Series) else pd.testing.assert_frame_equal
    try:
        check(a, b, check_exact=True, check_index_type=True, check_names=True, check_flags=True,
              check_freq=True, **({} if isinstance(a, pd.Series) else {"check_column_type": True}))
    except (AssertionError, TypeError, ValueError):
        return False
    return bool(a.attrs == b.attrs)


# -- reading ------------------------------------------------------------------------------------------


class Reader:
    """Decodes a record; ``get`` reads a part's bytes (a blob); ``where`` names the unit in errors."""

    def __init__(self, get: Callable[[str], bytes | None], where: str) -> None:
        self.get = get
        self.where = where

    def part(self, field: Mapping[str, Any]) -> bytes:
        b64, ref = field.get("b64"), field.get("ref")
        if isinstance(b64, str):
            return base64.b64decode(b64.encode("ascii"))
        if isinstance(ref, str):
            data = self.get(ref)
            if data is not None:
                return data
        raise CorruptRunError(f"{self.where}: its recorded result has neither b64 nor ref")

    def decode(self, field: Mapping[str, Any]) -> Any:
        codec = field.get("codec")
        try:
            if codec == "npy":
                return self.array(field)
            if codec == "parquet":
                return read_frame(sys_module("pandas", self.where), field, self.get, self.where)
            if "value" in field:
                return self.node(field["value"])
            return self.node(jsonio.loads(self.part(field)))
        except (CorruptRunError, MissingClass):
            raise
        except Exception as exc:  # bytes that do not decode: damage, not a reason to run the step again
            raise CorruptRunError(f"{self.where}: its recorded {codec} result cannot be read"
                                  f" ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})") from exc

    def array(self, field: Mapping[str, Any]) -> Any:
        np = sys_module("numpy", self.where)
        return np.load(io.BytesIO(self.part(field)), allow_pickle=False)

    def node(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.node(v) for v in value]
        if not isinstance(value, dict):
            return value
        kind = value.get("$")
        if kind is None:
            return {k: self.node(v) for k, v in value.items()}
        if kind == "dict":
            return {k: self.node(v) for k, v in value["value"].items()}
        if kind == "map":
            return {self.node(k): self.node(v) for k, v in value["items"]}
        if kind == "float":
            return float(value["value"])
        if kind == "npy":
            return self.array(value)
        if kind == "npscalar":
            np = sys_module("numpy", self.where)
            return np.frombuffer(bytes.fromhex(value["hex"]), dtype=_dtype(np, value["dtype"]))[0]
        if kind == "parquet":
            return read_frame(sys_module("pandas", self.where), value, self.get, self.where)
        if kind == "bytes":
            return base64.b64decode(value["b64"].encode("ascii"))
        if kind == "path":
            import pathlib

            return getattr(pathlib, value["class"])(value["value"])
        if kind in ("dataclass", "attrs", "pydantic"):
            return self.record(value)
        raise CorruptRunError(f"{self.where}: its recorded result has a node of unknown kind {kind!r}")

    def record(self, value: Mapping[str, Any]) -> Any:
        ref = value["class"]
        cls = find_class(ref)
        if cls is None:
            raise MissingClass(f"{self.where}: its recorded result is a {ref.replace(':', '.')}, a class this"
                               " process has not imported: import its module before calling the step")
        fields = {k: self.node(v) for k, v in value["fields"].items()}
        if value["$"] == "pydantic":
            extra = {k: self.node(v) for k, v in (value.get("extra") or {}).items()}
            return cls.model_construct(_fields_set=set(value.get("set") or ()), **fields, **extra)
        obj = cls.__new__(cls)
        for name, v in fields.items():
            object.__setattr__(obj, name, v)  # as pickle does: no __init__ or __post_init__ runs again
        return obj


class MissingClass(CorruptRunError):
    """A recorded result names a class no imported module defines."""


def sys_module(name: str, where: str) -> Any:
    """numpy or pandas, imported to read a result that holds their values."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise CorruptRunError(f"{where}: its recorded result needs {name}, which is not installed"
                              f" (pip install {name})") from None


def _dtype(np: Any, descr: Any) -> Any:
    if isinstance(descr, str):
        return np.dtype(descr)
    return np.lib.format.descr_to_dtype([tuple(d) for d in descr])


def read_frame(pd: Any, field: Mapping[str, Any], get: Callable[[str], bytes | None], where: str = "") -> Any:
    data = Reader(get, where).part(field)
    frame = pd.read_parquet(io.BytesIO(data), engine="pyarrow")
    if field.get("kind") != "series":
        return frame
    series = frame.iloc[:, 0]
    return series.rename(Reader(get, where).node(field.get("name")))
