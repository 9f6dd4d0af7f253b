"""Classes the result-format tests return from steps: defined at the top level of a module, so that a
recorded result can name them (``module:qualname``) and find them again."""

from __future__ import annotations

import dataclasses
from typing import Any

import attrs
import numpy as np
import pydantic


@dataclasses.dataclass
class Fit:
    weights: np.ndarray
    loss: float
    meta: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    name: str
    scale: np.float32
    computed: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "computed", len(self.name))


@attrs.define
class Pair:
    left: np.ndarray
    right: list[int]


class Report(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)

    title: str
    count: int = 0


@dataclasses.dataclass
class WithCache:
    x: int

    def warm(self) -> WithCache:
        self.cache = [self.x]  # an attribute that is not a field: not stored exactly
        return self
