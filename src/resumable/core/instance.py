"""What an instance of a family of steps is called: ``family+value`` (``clean+03``), with several
parameters ``family+v1+v2`` in the order they are declared (``train+0.1+3``).

``+`` because an ordinary step id cannot hold it (``[A-Za-z0-9._-]``), so every reader (status,
the report, completion, the workers' logs) tells an instance and its family from the id alone,
and no instance can take an ordinary step's id; and because it needs no quoting in sh, bash, zsh
or fish and is not one of bash's completion word breaks (``COMP_WORDBREAKS`` holds
``"'@><=;|&(:`` and blanks: doit's ``clean:03`` or a ``clean@03`` would complete as two words),
nor a glob character (``clean[03]``), nor refused in a unit id (``,`` and blanks). Pure.
"""

from __future__ import annotations

SEP = "+"


def family_of(step_id: str) -> str | None:
    """The family an instance id belongs to; None for an ordinary step."""
    head, sep, _ = step_id.partition(SEP)
    return head if sep else None


def is_instance(step_id: str) -> bool:
    return SEP in step_id
