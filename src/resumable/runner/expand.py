"""A job's families made into ordinary steps, before anything plans them.

Each family (``runner.families``) becomes one step per combination of its parameters' values, its
fields rendered (``runner.templates``), its ``needs`` resolved:

- ``"clean"`` from an instance of a family: the instances of ``clean`` with the same values of the
  parameters both have (one-to-one; refused when they share none);
- ``"features"`` from an ordinary step: every instance (fan-in);
- ``{ step = "evaluate", split = ["val", "test"] }``: the instances with those values (a value may
  name the step's own parameters, ``shard = "{id}"``); with no values, every instance;
- ``{features.artifacts}`` in ``run``, ``inputs`` or ``env``: every artifact of the instances of
  ``features`` the step needs (all of them when it does not say), relative to the step's ``cwd``;
  naming them needs them.

Ordinary steps whose ``needs`` or fields name a family go through here too, as families of one.
Problems are reported per family, not per instance: a mistake in a 1,000-instance family is one
line, not a thousand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resumable.core.instance import is_instance
from resumable.runner import inputs
from resumable.runner.families import Space, family_of, instance_id, read_space, value_text
from resumable.runner.joblocate import Problems, did_you_mean
from resumable.runner.jobmodel import Step
from resumable.runner.templates import RAW, Template, TemplateError, compile_text, put, quoted_values, unknown_parameter

_E: tuple[str, ...] = ()


@dataclass(slots=True)
class Family:
    """A step table that stands for several steps (``parametric``), or an ordinary step whose
    ``needs`` or fields name a family or another step's artifacts (one step)."""

    name: str
    step: Step  # the table read as a step: its fields as written (templates), no needs
    raw: Mapping[str, Any]  # the table as written: its family keys and needs
    position: int  # how many ordinary steps the job declares before it
    parametric: bool

    @property
    def table(self) -> str:
        return f"steps.{self.name}"


class _Instance:
    """One instance while the job is made: its values, its fields (rendered, or Templates that
    name artifacts, rendered once the needs are known), its needs."""

    __slots__ = ("combo", "fields", "id", "needs", "picked")

    def __init__(self, iid: str, combo: tuple[str, ...], fields: list[Any]) -> None:
        self.id = iid
        self.combo = combo
        self.fields = fields  # command, inputs, artifacts, env, cwd, log
        self.needs: list[str] = []
        self.picked: dict[str, list[str]] = {}  # family -> its instances this one needs

    def quoted(self) -> list[list[str]]:
        """Its values as put in each context (``templates.quoted_values``)."""
        return quoted_values(self.combo, {})


@dataclass(slots=True)
class _Expanded:
    family: Family
    names: list[str]
    instances: list[_Instance]
    templates: dict[str, Any]
    deferred: bool  # some field names artifacts: rendered once the needs are known


def expand(steps: list[Step], families: Sequence[Family], problems: Problems
           ) -> tuple[list[Step], list[tuple[str, os.stat_result]]]:
    """Every step of the job, in the order it declares them (a family's instances where it
    stands); and the directories the ``files`` patterns listed, with their stats."""
    scanned: list[tuple[str, os.stat_result]] = []
    done: list[_Expanded] = []
    broken: set[str] = set()  # families that make no step: what names them is not told again
    for fam in families:
        got = _instances(fam, problems, scanned)
        if got is not None:
            done.append(got)
        else:
            broken.add(fam.name)
    by_name = {e.family.name: e for e in done}
    plain = {s.id: s for s in steps}
    instance_ids = {i.id for e in done if e.family.parametric for i in e.instances}
    for e in done:
        _resolve_needs(e, by_name, plain, instance_ids, broken, problems)
    made: dict[str, tuple[str, tuple[str, ...]]] = {s.id: (s.cwd, s.artifacts) for s in steps}
    for e in done:
        for inst in e.instances:
            made[inst.id] = (inst.fields[4], inst.fields[2])
    out_family = {e.family.name: _steps_of(e, made) for e in done}
    _check_plain_needs(steps, plain, instance_ids, by_name, problems)
    ordered: list[Step] = []
    at = 0
    for fam in families:
        ordered.extend(steps[at:fam.position])
        at = fam.position
        ordered.extend(out_family.get(fam.name, ()))
    ordered.extend(steps[at:])
    _check_artifacts(ordered, problems)
    return ordered, scanned


# --- instances ------------------------------------------------------------------------------------

def _instances(fam: Family, problems: Problems, scanned: list[tuple[str, os.stat_result]]) -> _Expanded | None:
    step = fam.step
    if fam.parametric:
        if "{" in str(fam.raw.get("cwd", "")) and "files" in fam.raw:
            problems.add(fam.table, "cwd", "the cwd of a family with files cannot use its parameters")
            return None
        space = read_space(fam.table, fam.raw, step.cwd, problems)
        if space is None:
            return None
        scanned.extend(space.scanned)
    else:
        space = Space([], [()])
    templates = _compile(fam, space.names if fam.parametric else None, problems)
    render, slots, deferred = _renderer(templates)
    cache: dict[tuple[str, int], str] = {}
    seen: dict[str, tuple[str, ...]] = {}
    instances = []
    name = fam.name
    for combo in space.combos:
        iid = instance_id(name, combo) if fam.parametric else name
        if iid in seen:
            problems.add(fam.table, "params" if "params" in fam.raw else "files",
                         f"two instances have the id {iid!r}: {_show(space.names, seen[iid])} and "
                         f"{_show(space.names, combo)}")
            return None
        seen[iid] = combo
        flat = [combo[i] if c == RAW else _quote(combo[i], c, cache) for c, i in slots]
        instances.append(_Instance(iid, combo, render(flat)))
    return _Expanded(fam, space.names, instances, templates, deferred)


def _quote(value: str, context: int, cache: dict[tuple[str, int], str]) -> str:
    key = (value, context)
    got = cache.get(key)
    if got is None:
        got = cache[key] = put(value, context)
    return got


def _renderer(templates: Mapping[str, Any]) -> tuple[Any, list[tuple[int, int]], bool]:
    """(render(values) -> the fields of an instance, the (context, index) of each value it takes,
    whether a field names artifacts). Fields that are the same for every instance are one object."""
    every = _all_templates(templates)
    slots = sorted({(p.context, p.index) for t in every for p in t.params()})
    slot = {s: n for n, s in enumerate(slots)}
    deferred = any(t.refs for t in every)
    # Every field of an instance a leaf, in order; the leaves that take values rendered by one
    # str.format of their patterns joined by NUL (no value holds one: ``families.value_text``).
    cmd = templates["command"]
    argv = not isinstance(cmd, Template)
    groups: list[list[Template]] = [list(cmd) if argv else [cmd], list(templates["inputs"]),
                                    list(templates["artifacts"]), [t for _, t in templates["env"]],
                                    [templates["cwd"]], [templates["log"]] if templates["log"] is not None else []]
    leaves: list[tuple[bool, Any]] = []  # (rendered, index into the rendered parts | the value itself)
    patterns: list[str] = []
    spans: list[tuple[int, int]] = []
    for group in groups:
        start = len(leaves)
        for t in group:
            if t.text is None and not t.refs:
                leaves.append((True, len(patterns)))
                patterns.append(t.format_string(slot))
            else:
                leaves.append((False, t.text if t.text is not None else t))
        spans.append((start, len(leaves)))
    fmt = "\0".join(patterns).format if patterns else None
    keys = tuple(k for k, _ in templates["env"])
    fixed = [tuple(x for _, x in leaves[a:b]) if all(not r for r, _ in leaves[a:b]) else None for a, b in spans]
    (c0, c1), (i0, i1), (a0, a1), (e0, e1), (w0, _), (l0, l1) = spans

    def render(flat: list[str]) -> list[Any]:
        parts = fmt(*flat).split("\0") if fmt is not None else []
        v = [parts[x] if r else x for r, x in leaves]
        return [tuple(v[c0:c1]) if argv else v[c0],
                fixed[1] if fixed[1] is not None else tuple(v[i0:i1]),
                fixed[2] if fixed[2] is not None else tuple(v[a0:a1]),
                tuple(zip(keys, v[e0:e1], strict=True)) if keys else (),
                v[w0], v[l0] if l1 > l0 else None]

    return render, slots, deferred


def _show(names: Sequence[str], combo: Sequence[str]) -> str:
    return ", ".join(f"{n}={v!r}" for n, v in zip(names, combo, strict=True))


def _compile(fam: Family, names: list[str] | None, problems: Problems) -> dict[str, Any]:
    """Every templated field of the family: ``command`` (a Template, or a tuple of them for argv),
    ``inputs``/``artifacts`` (tuples), ``env`` (pairs), ``cwd`` and ``log`` (Template or None)."""
    step = fam.step
    out: dict[str, Any] = {}

    def comp(key: str, text: str, shell: bool = False) -> Template:
        try:
            return compile_text(text, names, shell=shell)
        except TemplateError as exc:  # told; the family is still made, so its needs are checked too
            problems.add(fam.table, key, str(exc))
            return Template((text,), text)

    cmd = step.command
    out["command"] = comp("run", cmd, True) if isinstance(cmd, str) else tuple(comp("run", a) for a in cmd)
    out["inputs"] = tuple(comp("inputs", a) for a in step.inputs)
    out["artifacts"] = tuple(comp("artifacts", a) for a in step.artifacts)
    out["env"] = tuple((k, comp("env", v)) for k, v in step.env)
    out["cwd"] = comp("cwd", step.cwd)
    out["log"] = comp("log", step.log) if step.log else None
    for key in ("artifacts", "cwd", "log"):
        value = out[key]
        found = value if isinstance(value, tuple) else (value,) if value is not None else ()
        if any(t.refs for t in found):
            problems.add(fam.table, key, "{step.artifacts} goes in run, inputs or env only")
            told = Template(("_",), "_")  # refused above; a stand-in, so the other checks go on
            out[key] = tuple(told for _ in found) if isinstance(value, tuple) else told
    return out


# --- needs ----------------------------------------------------------------------------------------


def _resolve_needs(e: _Expanded, by_name: Mapping[str, _Expanded], plain: Mapping[str, Step],
                   instance_ids: set[str], broken: set[str], problems: Problems) -> None:
    fam = e.family
    raw = fam.raw.get("needs", [])
    entries = raw if isinstance(raw, list) else [raw]
    for entry in entries:
        named = entry if isinstance(entry, str) else entry.get("step") if isinstance(entry, dict) else None
        if named in broken or (isinstance(named, str) and family_of(named) in broken):
            continue  # a family that makes no step: said once, where it is declared
        if isinstance(entry, str):
            _need_name(e, entry, by_name, plain, instance_ids, problems)
        elif isinstance(entry, dict):
            _need_table(e, entry, by_name, plain, problems)
        else:
            problems.add(fam.table, "needs", 'expected step ids, or tables like { step = "x", name = "value" }')
    refs = {r for t in _all_templates(e.templates) for r in t.refs} - broken
    for ref in sorted(refs):
        declared = plain[ref].artifacts if ref in plain else by_name[ref].family.step.artifacts \
            if ref in by_name else None
        if declared == ():
            problems.add(fam.table, _key_of(e.templates, ref), f"{{{ref}.artifacts}}: {ref} declares no artifacts")
            continue
        if ref in by_name and by_name[ref].family.parametric:
            for inst in e.instances:
                if ref not in inst.picked:
                    inst.picked[ref] = [i.id for i in by_name[ref].instances]
                    inst.needs.extend(inst.picked[ref])
        elif ref in plain or ref in by_name:
            for inst in e.instances:
                if ref not in inst.needs:
                    inst.needs.append(ref)
        else:
            problems.add(fam.table, _key_of(e.templates, ref), f"{{{ref}.artifacts}}: no step or family {ref!r}"
                         f"{did_you_mean(ref, [*plain, *by_name])}")


def _all_templates(templates: Mapping[str, Any]) -> list[Template]:
    out: list[Template] = []
    for key, t in templates.items():
        if t is None:
            continue
        if isinstance(t, Template):
            out.append(t)
        elif key == "env":
            out.extend(v for _, v in t)
        else:
            out.extend(t)
    return out


def _key_of(templates: Mapping[str, Any], ref: str) -> str:
    for key, label in (("command", "run"), ("inputs", "inputs"), ("env", "env")):
        if ref in [r for t in _all_templates({key: templates[key]}) for r in t.refs]:
            return label
    return "run"


def _need_name(e: _Expanded, name: str, by_name: Mapping[str, _Expanded], plain: Mapping[str, Step],
               instance_ids: set[str], problems: Problems) -> None:
    fam = e.family
    if name == fam.name or family_of(name) == fam.name:
        problems.add(fam.table, "needs", "a step cannot need itself")
        return
    other = by_name.get(name)
    if other is not None and other.family.parametric:
        if fam.parametric:
            _one_to_one(e, other, problems)
        else:
            ids = [i.id for i in other.instances]
            for inst in e.instances:
                inst.picked[name] = ids
                inst.needs.extend(ids)
        return
    if name in plain or name in by_name or name in instance_ids:
        for inst in e.instances:
            inst.needs.append(name)
        return
    problems.add(fam.table, "needs", f"unknown step {name!r} in needs"
                 f"{did_you_mean(name, [*plain, *by_name, *sorted(instance_ids)[:1000]])}")


def _one_to_one(e: _Expanded, other: _Expanded, problems: Problems) -> None:
    fam = e.family
    shared = [n for n in e.names if n in other.names]
    if not shared:
        problems.add(fam.table, "needs", f"{fam.name!r} ({', '.join(e.names)}) and {other.family.name!r} "
                     f"({', '.join(other.names)}) share no parameter, so their instances cannot be matched:"
                     f' need every instance with {{ step = "{other.family.name}" }}, or name the values, like'
                     f' {{ step = "{other.family.name}", {other.names[0]} = "{{{e.names[0]}}}" }}')
        return
    mine = [e.names.index(n) for n in shared]
    theirs = [other.names.index(n) for n in shared]
    index: dict[tuple[str, ...], list[str]] = {}
    for inst in other.instances:
        index.setdefault(tuple(inst.combo[i] for i in theirs), []).append(inst.id)
    for inst in e.instances:
        key = tuple(inst.combo[i] for i in mine)
        ids = index.get(key)
        if ids is None:
            problems.add(fam.table, "needs", f"{inst.id} needs {other.family.name} with "
                         f"{_show(shared, key)}, which has no such instance")
            return
        inst.picked[other.family.name] = ids
        inst.needs.extend(ids)


def _need_table(e: _Expanded, entry: Mapping[str, Any], by_name: Mapping[str, _Expanded],
                plain: Mapping[str, Step], problems: Problems) -> None:
    fam = e.family
    target = entry.get("step")
    if not isinstance(target, str):
        problems.add(fam.table, "needs", 'a table in needs names its step: { step = "x", name = "value" }')
        return
    if target == fam.name:
        problems.add(fam.table, "needs", "a step cannot need itself")
        return
    other = by_name.get(target)
    if other is None or not other.family.parametric:
        if (target in plain or target in by_name) and set(entry) == {"step"}:
            for inst in e.instances:
                inst.needs.append(target)  # an ordinary step, named the long way
            return
        known = [n for n, x in by_name.items() if x.family.parametric]
        problems.add(fam.table, "needs", f"{{ step = {target!r} }}: no family of that name"
                     + (did_you_mean(target, known) if target not in plain else " (a step without parameters)"))
        return
    filters: list[tuple[int, list[Template]]] = []
    for key, value in entry.items():
        if key == "step":
            continue
        if key not in other.names:
            problems.add(fam.table, "needs", f"{{ step = {target!r} }}: "
                         + unknown_parameter(key, other.names, braces=False).replace("the step's", f"{target}'s"))
            return
        texts = [value_text(v) for v in (value if isinstance(value, list) else [value])]
        if not texts or any(t is None for t in texts):
            problems.add(fam.table, "needs", f"{key}: expected a value (a string or a number) or a list of them")
            return
        try:
            filters.append((other.names.index(key),
                            [compile_text(t, e.names if fam.parametric else [], shell=False) for t in texts if t]))
        except TemplateError as exc:
            problems.add(fam.table, "needs", str(exc))
            return
    assert isinstance(target, str)
    # value -> positions of the instances that have it, per filtered parameter: a family needing
    # a subset of another, instance by instance, costs a lookup per value, not a scan.
    where: dict[int, dict[str, list[int]]] = {}
    for i, _ in filters:
        index = where.setdefault(i, {})
        for pos, o in enumerate(other.instances):
            index.setdefault(o.combo[i], []).append(pos)
    everyone = range(len(other.instances))
    for inst in e.instances:
        chosen: set[int] | None = None
        quoted = inst.quoted() if filters else []
        for i, ts in filters:
            values = sorted({t.render(quoted) for t in ts})
            absent = [v for v in values if v not in where[i]]
            if absent:
                problems.add(fam.table, "needs", f"{inst.id} needs {target} with {other.names[i]} = {absent[0]!r},"
                             " which has no such instance")
                return
            these = {pos for v in values for pos in where[i][v]}
            chosen = these if chosen is None else chosen & these
        positions = sorted(chosen) if chosen is not None else everyone
        if not positions:
            problems.add(fam.table, "needs", f"{inst.id} needs {target} with values no instance has together")
            return
        ids = [other.instances[pos].id for pos in positions]
        inst.picked[target] = [*inst.picked.get(target, []), *ids]
        inst.needs.extend(ids)


def _check_plain_needs(steps: Sequence[Step], plain: Mapping[str, Step], instance_ids: set[str],
                       by_name: Mapping[str, _Expanded], problems: Problems) -> None:
    """An ordinary step's need of an instance (``download+03``) names one that exists."""
    for s in steps:
        for n in s.needs:
            if is_instance(n) and n not in instance_ids:
                problems.add(f"steps.{s.id}", "needs", f"unknown step {n!r} in needs"
                             f"{did_you_mean(n, sorted(instance_ids)[:1000])}")


# --- the steps ------------------------------------------------------------------------------------


def _steps_of(e: _Expanded, made: Mapping[str, tuple[str, tuple[str, ...]]]) -> list[Step]:
    s = e.family.step
    shell, timeout, retries, backoff, jitter, grace = s.shell, s.timeout, s.retries, s.backoff, s.jitter, s.grace
    norm = os.path.normpath
    out = []
    for inst in e.instances:
        if e.deferred:
            _finish(inst, made)
        command, ins, arts, env, cwd, log = inst.fields
        if "/." in cwd or "//" in cwd:
            cwd = norm(cwd)
        needs = tuple(dict.fromkeys(inst.needs)) if inst.needs else _E
        out.append(Step(inst.id, command, shell, needs, timeout, retries, backoff, jitter, grace, arts, ins, env,
                        cwd, norm(log) if log else None))
    return out


def _finish(inst: _Instance, made: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
    """Render the fields that name artifacts, now that the needs are known."""
    f = inst.fields
    cwd = f[4]
    quoted = inst.quoted()
    arts: dict[str, list[str]] = {}

    def paths(ref: str) -> list[str]:
        got = arts.get(ref)
        if got is None:
            got = arts[ref] = [os.path.relpath(inputs.resolve(made[sid][0], a), cwd)
                               for sid in inst.picked.get(ref) or [ref] if sid in made for a in made[sid][1]]
        return got

    def one(x: Any) -> Any:
        if not isinstance(x, Template):
            return x
        for ref in x.refs:
            paths(ref)
        return x.render(quoted, arts)

    cmd = f[0]
    f[0] = one(cmd) if not isinstance(cmd, tuple) else _listed(cmd, quoted, paths)
    f[1] = _listed(f[1], quoted, paths)
    f[3] = tuple((k, one(v)) for k, v in f[3])


def _listed(items: tuple[Any, ...], quoted: list[list[str]], paths: Any) -> tuple[str, ...]:
    """A list field: a whole ``{step.artifacts}`` entry is one entry per file."""
    out: list[str] = []
    for x in items:
        if not isinstance(x, Template):
            out.append(x)
        elif (whole := x.whole_artifacts) is not None:
            out.extend(paths(whole))
        else:
            out.append(x.render(quoted, {r: paths(r) for r in x.refs}))
    return tuple(out)


def _check_artifacts(steps: Sequence[Step], problems: Problems) -> None:
    """Two steps, one of them an instance, that declare the same artifact: refused (they would
    race to write it, and either's re-run would undo the other's work). Once per family."""
    owner: dict[str, str] = {}
    told: set[str] = set()
    for s in steps:
        for a in s.artifacts:
            path = inputs.resolve(s.cwd, a)
            first = owner.setdefault(path, s.id)
            if first == s.id or not (is_instance(first) or is_instance(s.id)):
                continue
            fam = family_of(s.id) or s.id
            if fam in told:
                continue
            told.add(fam)
            problems.add(f"steps.{fam}", "artifacts", f"{first} and {s.id} both make {a!r}: give each instance"
                         " its own artifact (use its parameters in the path)")
