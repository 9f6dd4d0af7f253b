"""Placeholders in a family's fields: ``{name}`` (a parameter's value) and ``{step.artifacts}``
(every artifact of the instances of ``step`` a step needs), compiled once per field, rendered once
per instance.

In a family's fields ``{{`` and ``}}`` are literal braces; ``${VAR}`` and braces around anything
that is not a name (awk's ``{print $1}``) are left as written, for the shell. In an ordinary step
only ``{step.artifacts}`` is a placeholder: its text is otherwise taken as it is, as it always was.

A value put into a ``run`` string is quoted for the POSIX shell according to where it stands: bare
(``shlex.quote``), inside ``'...'`` or inside ``"..."``, so a value with spaces, quotes, ``$`` or a
backquote arrives as exactly the characters it holds, in one argument. Anywhere else (a list
``run``, inputs, artifacts, env, cwd, log) a value is put as it is.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

# A placeholder: {{ or }} (literal braces), ${ (the shell's), or {name} / {name.artifacts}.
_TOKEN = re.compile(r"\{\{|\}\}|\$\{|\{([A-Za-z0-9][A-Za-z0-9._-]*)\.artifacts\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")  # needs no quoting anywhere in a shell word

RAW, BARE, SINGLE, DOUBLE = 0, 1, 2, 3  # how a value is put: as is; shell word; in '...'; in "..."


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter's value at a place in a template: ``index`` into the instance's values."""

    index: int
    context: int


@dataclass(frozen=True, slots=True)
class Artifacts:
    """``{step.artifacts}`` at a place in a template."""

    step: str
    context: int


Piece = str | Param | Artifacts


class TemplateError(ValueError):
    """A placeholder that names no parameter (the message says which, and what the names are)."""


@dataclass(frozen=True, slots=True)
class Template:
    """A field's text cut into literal pieces and placeholders. ``text`` when it has none;
    ``refs``: the steps whose artifacts it names."""

    pieces: tuple[Piece, ...]
    text: str | None
    refs: tuple[str, ...] = ()

    @staticmethod
    def of(pieces: tuple[Piece, ...]) -> Template:
        if all(p.__class__ is str for p in pieces):
            whole = "".join(pieces)  # type: ignore[arg-type]
            return Template((whole,), whole)
        return Template(pieces, None, tuple(p.step for p in pieces if isinstance(p, Artifacts)))

    def params(self) -> list[Param]:
        return [p for p in self.pieces if isinstance(p, Param)]

    def format_string(self, slot: dict[tuple[int, int], int]) -> str:
        """The template as a ``str.format`` pattern over an instance's values, each (context,
        index) at its ``slot``: rendered in C, a hundred thousand instances in a blink. For a
        template without ``{step.artifacts}``."""
        out = []
        for p in self.pieces:
            if isinstance(p, str):
                out.append(p.replace("{", "{{").replace("}", "}}"))
            elif isinstance(p, Param):
                out.append(f"{{{slot[(p.context, p.index)]}}}")
            else:
                raise ValueError("a template naming artifacts has no format string")
        return "".join(out)

    @property
    def whole_artifacts(self) -> str | None:
        """The step, when the template is exactly one ``{step.artifacts}`` (a list entry that
        stands for one entry per file)."""
        if len(self.pieces) == 1 and isinstance(self.pieces[0], Artifacts):
            return self.pieces[0].step
        return None

    def render(self, quoted: Sequence[Sequence[str]], artifacts: dict[str, list[str]] | None = None) -> str:
        """The text for one instance: ``quoted[context][index]`` is its value as put there;
        ``artifacts``: the paths each ``{step.artifacts}`` stands for."""
        if self.text is not None:
            return self.text
        out: list[str] = []
        for p in self.pieces:
            if p.__class__ is str:
                out.append(p)
            elif p.__class__ is Param:
                out.append(quoted[p.context][p.index])
            else:
                assert isinstance(p, Artifacts) and artifacts is not None
                out.append(" ".join(put(a, p.context) for a in artifacts[p.step]))
        return "".join(out)


def compile_text(text: str, names: Sequence[str] | None, *, shell: bool = False) -> Template:
    """``text`` as a template over the parameters ``names`` (None: an ordinary step, where only
    ``{step.artifacts}`` is a placeholder); ``shell``: a ``run`` string (values quoted by where
    they stand). TemplateError for ``{name}`` that is not a parameter."""
    if "{" not in text and (names is None or "}}" not in text):
        return Template((text,), text)
    pieces: list[Piece] = []
    literal: list[str] = []
    state = _Quotes() if shell else None
    pos = 0
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        arts, name = m.group(1), m.group(2)
        if names is None and not arts:
            continue  # an ordinary step's braces are its own
        if token == "${":
            continue
        before = text[pos:m.start()]
        literal.append(before)
        if state is not None:
            state.feed(before)
        pos = m.end()
        if token in ("{{", "}}"):
            literal.append(token[0])
            if state is not None:
                state.feed(token[0])
            continue
        context = RAW if state is None else state.context
        if any(literal):
            pieces.append("".join(literal))
        literal = []
        if arts:
            pieces.append(Artifacts(arts, context))
            continue
        assert names is not None
        if name not in names:
            raise TemplateError(unknown_parameter(name, names))
        pieces.append(Param(names.index(name), context))
    literal.append(text[pos:])
    tail = "".join(literal)
    if tail:
        pieces.append(tail)
    return Template.of(tuple(pieces))


def unknown_parameter(name: str, names: Sequence[str], *, braces: bool = True) -> str:
    """The problem of a reference to a parameter the step does not have, with the closest one."""
    import difflib

    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = f"the step's parameters: {', '.join(names)}" if names else "the step has no parameters"
    if not braces:
        return f"unknown parameter {name!r}{hint}; {known}"
    return f"unknown parameter {{{name}}}{hint}; {known} (write {{{{ and }}}} for literal braces)"


class _Quotes:
    """Where a POSIX shell word stands after the text fed so far: bare, in '...' or in "..."."""

    __slots__ = ("context", "escaped")

    def __init__(self) -> None:
        self.context = BARE
        self.escaped = False

    def feed(self, text: str) -> None:
        ctx, esc = self.context, self.escaped
        for ch in text:
            if esc:
                esc = False
            elif ctx == SINGLE:
                if ch == "'":
                    ctx = BARE
            elif ch == "\\":
                esc = True
            elif ctx == DOUBLE:
                if ch == '"':
                    ctx = BARE
            elif ch == "'":
                ctx = SINGLE
            elif ch == '"':
                ctx = DOUBLE
        self.context, self.escaped = ctx, esc


_DOUBLE_SPECIAL = re.compile(r'([\\"$`])')


def put(value: str, context: int) -> str:
    """``value`` as it must be written at a place of that context to stand for itself."""
    if context == RAW or _SAFE.match(value):
        return value
    if context == BARE:
        return shlex.quote(value)
    if context == SINGLE:
        return value.replace("'", "'\\''")  # close, an escaped quote, reopen
    return _DOUBLE_SPECIAL.sub(r"\\\1", value)


def quoted_values(values: Sequence[str], cache: dict[tuple[str, int], str]) -> list[list[str]]:
    """Each value as put in each context (indexed ``[context][index]``), remembered in ``cache``:
    instances share most of their values."""
    out: list[list[str]] = [list(values)]
    for context in (BARE, SINGLE, DOUBLE):
        row = []
        for v in values:
            key = (v, context)
            q = cache.get(key)
            if q is None:
                q = cache[key] = put(v, context)
            row.append(q)
        out.append(row)
    return out
