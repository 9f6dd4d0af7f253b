"""Values the content-key tests key: imported by the tests, and by a fresh interpreter that must
compute the same keys (``test_content_keys``)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pydantic


@dataclasses.dataclass(frozen=True)
class Config:
    lr: float
    layers: tuple[int, ...]
    note: str = dataclasses.field(default="", compare=False)  # not part of equality: not of the key


@attrs.define
class Point:
    x: int
    y: int


class Item(pydantic.BaseModel):
    name: str
    qty: int


class Color(enum.Enum):
    RED = "red"


class Declared:
    """An object that says what identifies it."""

    def __init__(self, name: str, cache: object) -> None:
        self.name, self.cache = name, cache

    def __resumable_key__(self) -> object:
        return {"name": self.name}


def cases() -> dict[str, dict[str, Any]]:
    return {
        "f8 array": {"a": np.arange(6, dtype="<f8").reshape(2, 3)},
        "i4 array": {"a": np.arange(6, dtype="<i4")},
        "bool 0-d": {"a": np.array(True)},
        "str array": {"a": np.array(["a", "bc"])},
        "datetime array": {"a": np.array(["2020-01-01", "2021-06-30"], dtype="datetime64[D]")},
        "structured": {"a": np.zeros(2, dtype=[("x", "<i2"), ("y", "<f4")])},
        "object array": {"a": np.array([1, "x", None], dtype=object)},
        "numpy scalars": {"a": np.float32(1.5), "b": np.int64(7)},
        "dataclass": {"cfg": Config(0.1, (64, 32), note="ignored")},
        "attrs": {"p": Point(1, 2)},
        "pydantic": {"m": Item(name="bolt", qty=3)},
        "bytes": {"b": b"\x00\x01binary"},
        "path": {"p": pathlib.Path("data/input.csv")},
        "enum set nan": {"c": Color.RED, "s": {3, 1, 2}, "n": float("nan")},
        "dates": {"d": datetime.date(2024, 2, 29),
                  "t": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
                  "td": datetime.timedelta(hours=1)},
        "decimal uuid": {"d": decimal.Decimal("1.10"), "u": uuid.UUID(int=1)},
        "int keys": {"d": {1: "a", 2: "b"}},
        "nul string": {"s": "\x00tag", "a": np.zeros(1)},
        "dataframe": {"df": pd.DataFrame({"x": [1, 2], "y": [0.5, 1.5]}, index=["r1", "r2"])},
        "series": {"s": pd.Series([1.0, 2.0], name="v")},
    }
