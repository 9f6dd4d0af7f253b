"""The computation the kill and pool tests map over: deterministic, so a fresh run can check it."""

from __future__ import annotations

import hashlib


def compute(i: int) -> dict[str, object]:
    digest = hashlib.sha256(str(i).encode()).hexdigest()
    return {"i": i, "digest": digest[:16], "square": i * i}
