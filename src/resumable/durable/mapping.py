"""One ``run.map`` call as the pools see it: its items, their places in the result, the look-up of
the recorded ones, and the bar. Shared by the thread pool (``pool``) and the executors
(``executors``, ``dask_client``), which import it and nothing of each other's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from resumable.durable.attempts import StepFailed
from resumable.durable.digest import Recorded
from resumable.durable.progress import Bar
from resumable.durable.steps import Step

if TYPE_CHECKING:
    from collections import abc  # ``Mapping`` here is the map over items, below


class Mapping:
    """One ``run.map`` call: the items, their places in the result, and the bar."""

    def __init__(self, step: Step, items: list[tuple[Any, ...]], bar: Bar) -> None:
        self.step = step
        self.items = items
        self.bar = bar
        self.results: list[Any] = [None] * len(items)
        self.places: dict[str, list[int]] = {}  # unit id -> places of the items still to run
        self.args: dict[str, tuple[Any, ...]] = {}
        self.seen: abc.Mapping[str, object] = {}  # the run's units as the look-up last saw them

    def settle(self, uid: str, value: Any, failed: bool) -> None:
        places = self.places.get(uid, [])
        for i in places:
            self.results[i] = value
        self.bar.advance(len(places), failed=len(places) if failed else 0)

    def look_up(self, chunk: int = 2048) -> None:
        """Answer every recorded item; group the rest by unit id (equal items run once). From a
        digest when this process has not loaded the run (``digest``), else in chunks under the
        records' lock: one lock, one look at the run and one tick of the bar per chunk."""
        digest = self.step.engine.records.take_digest()
        if digest is not None:
            self.seen = digest.units
            self.look_up_in(digest.units, chunk)
            return
        step, records, items = self.step, self.step.engine.records, self.items
        for start in range(0, len(items), chunk):
            with records.lock:
                units = self.seen = records.units()
                self.answer(range(start, min(start + chunk, len(items))), units,
                            functools.partial(answer_unit, step, units))

    @property
    def totals(self) -> tuple[int, int]:
        """(the step's unit count once this map ends, how many of them are done now), from the units
        the look-up saw: the ones the step has, and this map's items it has not recorded yet. A
        step's units are those whose id starts with its name and a colon."""
        prefix = self.step.name + ":"
        units = self.seen
        have = done = 0
        for uid, unit in units.items():
            if uid.startswith(prefix):
                have += 1
                status = unit.status if isinstance(unit, Recorded) else unit.get("status") if isinstance(unit, dict) \
                    else None
                done += status == "done"
        new = sum(1 for uid in self.places if uid not in units)
        return have + new, done

    def look_up_in(self, units: dict[str, Recorded], chunk: int) -> None:
        """``look_up`` from a digest's units, whose results are handed out as they are: to the
        first place of each; a repeated item gets its own copy."""
        step, given = self.step, set()

        def answer(uid: str) -> tuple[bool, Any]:
            fresh = uid not in given
            given.add(uid)
            return step.answer_recorded(uid, units.get(uid), copy=not fresh)

        for start in range(0, len(self.items), chunk):
            self.answer(range(start, min(start + chunk, len(self.items))), units, answer)

    def answer(self, places: range, units: abc.Mapping[str, object], answer: Callable[[str], tuple[bool, Any]]) -> None:
        step, items = self.step, self.items
        answered = failed = 0
        for i in places:
            args = items[i]
            uid = step.unit_id(args, {}, units)
            if uid in self.places:
                self.places[uid].append(i)
                continue
            try:
                found, value = answer(uid)
            except StepFailed as exc:
                found, value = True, exc
                failed += 1
            if found:
                self.results[i] = value
                answered += 1
            else:
                self.places[uid] = [i]
                self.args[uid] = args
        self.bar.advance(answered, failed=failed)


def answer_unit(step: Step, units: abc.Mapping[str, object], uid: str) -> tuple[bool, Any]:
    return step.answer(uid, units.get(uid))
