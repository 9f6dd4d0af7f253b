"""The click callback of every duration option (``--lease``, ``--timeout``, ``--grace``, ...): the
one parser, ``core.durations``, so each is bounded up front, refused in one line, exit 1."""

from __future__ import annotations

from collections.abc import Callable

import click

from resumable.core import durations

Callback = Callable[[click.Context, click.Parameter, object], "float | None"]


def at_least(minimum: float) -> Callback:
    """A callback for a duration option that must be at least ``minimum`` seconds."""

    def parse(ctx: click.Context, param: click.Parameter, value: object) -> float | None:
        if value is None:
            return None
        try:
            return durations.seconds(value, minimum=minimum)
        except durations.DurationError as exc:
            raise click.BadParameter(str(exc)) from None  # click names the option

    return parse


duration = at_least(0.0)
