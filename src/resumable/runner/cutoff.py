"""Early cutoff in the local runner: the rule is ``core.policy``'s (shared with the workers);
this keeps what the scheduler needs to apply it while a session runs.

A step decided ``cutoff`` (it runs only because a need re-runs, see ``runner.explain``) stays done
and un-invalidated until its needs are done; then, if every need made the same artifacts (by
content) as when the step last ran, it is skipped (``policy.CUTOFF_REASON``), else it is
invalidated and runs. Every step the cutoff applies to records what its needs made in its
fingerprint (``needs``) when it starts, for the next session to compare with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resumable.core import policy
from resumable.runner.explain import Decision
from resumable.runner.jobfile import Step


class Cutoff:
    __slots__ = ("invalidations", "made", "pending", "units")

    def __init__(self, decisions: Mapping[str, Decision], units: Mapping[str, Any]) -> None:
        self.units = units
        self.pending = {sid for sid, d in decisions.items() if d.cutoff}  # done units, not invalidated
        self.made: dict[str, object] = {}  # artifact records of the steps done in this session
        self.invalidations: dict[str, str] = {}  # step -> why it runs after all (recorded as it starts)

    @staticmethod
    def applies(step: Step) -> bool:
        """Whether the step records what its needs made (every step with needs does)."""
        return bool(step.needs)

    def finished(self, step_id: str, artifacts: object) -> None:
        self.made[step_id] = artifacts

    def _artifacts_of(self, step_id: str) -> object:
        if step_id in self.made:
            return self.made[step_id]
        unit = self.units.get(step_id)
        return unit.get("artifacts") if isinstance(unit, dict) else None

    def upstream(self, step: Step) -> dict[str, str | None]:
        """What the step's needs made, now (recorded in its fingerprint as it starts)."""
        return policy.upstream_digests(step.needs, self._artifacts_of)

    def keeps_done(self, step: Step) -> str | None:
        """The step's needs are done: why it stays done (``policy.keeps_done``), or None, and then
        why it runs after all is kept for the record it starts with."""
        if step.id not in self.pending:
            return None
        self.pending.discard(step.id)
        unit = self.units.get(step.id)
        stored = unit.get("fingerprint") if isinstance(unit, dict) else None
        current = self.upstream(step)
        reran = [n for n in step.needs if n in self.made]
        if policy.keeps_done(bool(step.artifacts or step.inputs), stored, current, reran):
            return policy.kept_reason(reran)
        changed = policy.upstream_changes(stored, current) or reran or list(step.needs)
        self.invalidations[step.id] = f"upstream re-ran: {', '.join(changed)}"
        return None

    def is_pending(self, step_id: str) -> bool:
        """Still done and not invalidated: nothing may be recorded on it but a run's own records."""
        return step_id in self.pending
