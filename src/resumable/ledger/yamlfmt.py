"""The checkpoint file format: YAML exactly as the seed writes it, read with PyYAML's safe loader.

Writing uses PyYAML's pure-Python safe dumper with the seed's options, because its bytes are the
seed's bytes (``yaml.dump`` of plain dicts, lists and strings is the same with the safe and the full
dumper). libyaml's emitter is faster but not byte-identical: it quotes non-BMP characters and empty
keys differently and folds long double-quoted strings elsewhere; both load to the same data, but a
file written by resumable should be indistinguishable from one written by the seed. One dump per
write costs ~0.3 ms, nothing beside the process start-up.

Reading uses libyaml's safe loader when PyYAML was built with it (8x faster: ``list`` of 10,000
checkpoints is mostly YAML parsing), else the pure-Python safe loader. Never the full loader: a
checkpoint file is data, and a tag that builds a Python object is refused.
"""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAMLError = yaml.YAMLError


def dump(document: dict[str, Any]) -> bytes:
    text: str = yaml.dump(document, Dumper=yaml.SafeDumper, default_flow_style=False, sort_keys=False,
                          allow_unicode=True)
    return text.encode("utf-8")


def load(data: bytes) -> Any:
    """The document in ``data``; raises ``YAMLError`` (or RecursionError for absurd nesting)."""
    return yaml.load(data, Loader=_LOADER)
