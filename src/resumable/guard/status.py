"""``resumable guard status NAME [--history]``: the state, whether a pass is running (and who holds
its lock: the guard, or a command that outlived it), a pass whose outcome is still to be recorded,
and with ``--history`` every event."""

from __future__ import annotations

from resumable.errors import NoRunError
from resumable.guard import history, state
from resumable.guard.lock import GuardLock
from resumable.guard.protocol import escape, paths_for, utcnow


def status_text(name: str, state_dir: str | None, with_history: bool) -> str:
    paths = paths_for(name, state_dir)
    current = state.read(paths.state, name)
    events = history.read(paths.history) if with_history or current is None else []
    lock = GuardLock(paths.lock, paths.lock_info)
    held = lock.held_elsewhere()
    if current is None and not events and not held:
        raise NoRunError(f"no guard state for {name} in {paths.state_dir}")
    current = current or state.GuardState()
    running = f"yes ({lock.holder().describe(utcnow())})" if held else "no"
    code = "-" if current.last_exit_code is None else str(current.last_exit_code)
    breaker = "not tripped" if current.breaker_tripped_at == "never" else f"TRIPPED at {current.breaker_tripped_at}"
    lines = [f"guard {name}  (state {paths.state})",
             f"  running:              {running}",
             f"  passes:               {current.pass_count}",
             f"  last status:          {current.last_status} (exit {code}) at {current.last_run_at}",
             f"  consecutive failures: {current.consecutive_failures}",
             f"  breaker:              {breaker}"]
    if current.unfinished:
        fate = "running" if held else ("never recorded its outcome (its guard was killed); the next pass records it "
                                       "as a failure")
        lines.append(f"  unfinished pass:      {current.pass_count}, started at {current.pass_started_at}, {fate}")
    if current.dry_run:
        lines.append("  last invocation:      a dry run (nothing ran, nothing else changed)")
    if with_history:
        finished = {e.get("pass") for e in events if e is not None and e.get("event") == "pass"}
        lines.append("")
        lines.append("  PASS  STARTED               FINISHED              STATUS   EXIT  LOG")
        for event in events:
            if event is None or event.get("event") != "start" or event.get("pass") not in finished:
                lines.append("  " + _history_line(event))
    return escape("\n".join(lines)) + "\n"


def _history_line(event: dict[str, object] | None) -> str:
    if event is None:
        return "(unreadable line)"
    kind = event.get("event")
    if kind == "pass":
        started, finished = event.get("started_at", ""), event.get("finished_at") or "-"
        code = event.get("exit_code")
        note = f"  ({event['note']})" if event.get("note") else ""
        return (f"{event.get('pass', '?')!s:<5} {started!s:<21} {finished!s:<21} "
                f"{event.get('status', '')!s:<8} {'-' if code is None else code!s:<5} {event.get('log') or ''}{note}")
    if kind == "start":
        return (f"{event.get('pass', '?')!s:<5} {event.get('started_at', '')!s:<21} {'-':<21} {'started':<8} "
                f"{'':<5} {event.get('log', '')}")
    if kind == "halt":
        return (f"{'-':<5} {event.get('at', '')!s:<21} {'':<21} {'HALT':<8} {'':<5} "
                f"breaker {event.get('breaker', '?')}, {event.get('consecutive_failures', '?')} consecutive failures")
    if kind == "reset":
        return f"{'-':<5} {event.get('at', '')!s:<21} {'':<21} {'reset':<8} {'':<5} {event.get('what', '')}"
    if kind == "dry-run":
        return f"{'-':<5} {event.get('at', '')!s:<21} {'':<21} {'dry run':<8} {'':<5} would {event.get('would', '')}"
    return f"(unknown event {kind!r})"
