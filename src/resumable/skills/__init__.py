"""Agent Skills shipped with resumable, as data: one folder per skill holding its ``SKILL.md`` (the
Agent Skills format: YAML frontmatter with ``name`` and ``description``, then the instructions).

::

    checkpoint-resume/   durable, resumable multi-unit work with the low-level verbs (ulpi's procedure)
    phase-checkpoint/    the phase ledger (OmniNode's checkpoint_manager.py) and the recurring-run guard
    step-runner/         job files, `resumable run`, status, resuming
    install.py           where each agent looks for skills, and the installer that copies them there

Nothing here imports the rest of resumable but its errors and the file-system seam: the skills are
text, and ``resumable skills`` only copies them.
"""

from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def names() -> list[str]:
    """The shipped skills, by name (each a folder here holding a SKILL.md)."""
    return sorted(n for n in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, n, "SKILL.md")))


def text(name: str) -> bytes:
    """A shipped skill's SKILL.md, exactly as shipped."""
    with open(os.path.join(HERE, name, "SKILL.md"), "rb") as f:
        return f.read()


def description(name: str) -> str:
    """The ``description`` of a shipped skill's frontmatter (a one-line value, as the skills write it)."""
    for line in text(name).decode("utf-8").splitlines()[1:]:
        if line == "---":
            break
        if line.startswith("description:"):
            return line.split(":", 1)[1].strip()
    return ""
