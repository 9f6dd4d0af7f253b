"""The checkpoint file format: YAML exactly as OmniNode's tools write it, read with PyYAML's safe loader.

Writing uses PyYAML's pure-Python safe dumper with OmniNode's options, because its bytes are
OmniNode's bytes (``yaml.dump`` of plain dicts, lists and strings is the same with the safe and the full
dumper). libyaml's emitter is faster but not byte-identical: it quotes non-BMP characters and empty
keys differently and folds long double-quoted strings elsewhere; both load to the same data, but a
file written by resumable should be indistinguishable from one written by OmniNode's tools. One dump per
write costs ~0.3 ms, nothing beside the process start-up.

Reading uses libyaml's safe loader when PyYAML was built with it (8x faster: ``list`` of 10,000
checkpoints is mostly YAML parsing), else the pure-Python safe loader. Never the full loader: a
checkpoint file is data, and a tag that builds a Python object is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAMLError = yaml.YAMLError


class _Dumper(yaml.SafeDumper):
    """OmniNode's dumper, except for one PyYAML defect: with ``allow_unicode`` a string holding
    U+0085 (NEL) is written single-quoted with the NEL raw, and every YAML reader folds it to a
    space, so OmniNode's files silently change such strings. Those strings (only those: an
    exhaustive check over all code points finds no other) are written double-quoted, where NEL is
    escaped as ``\\N`` and reads back exactly, in OmniNode's reader too."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\x85" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_str(value)


_Dumper.add_representer(str, _represent_str)


def dump(document: Mapping[str, Any]) -> bytes:
    text: str = yaml.dump(document, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True)
    return text.encode("utf-8")


def load(data: bytes) -> Any:
    """The document in ``data``; raises ``YAMLError`` (or RecursionError for absurd nesting)."""
    return yaml.load(data, Loader=_LOADER)
