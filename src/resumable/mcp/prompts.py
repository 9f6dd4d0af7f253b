"""The two prompts: "resume this run" and "why did this fail". Each is the run's summary (bounded, as
every answer) with the procedure the checkpoint-resume skill teaches: decide, skip what is proven
done, redo the rest, mark done only what is verified."""

from __future__ import annotations

from resumable.errors import ResumableError
from resumable.mcp import answers
from resumable.mcp.bound import BoundStore
from resumable.mcp.runs import run_summary


def _summary(bound: BoundStore, run: str) -> str:
    try:
        return answers.answer(run_summary(bound, run))
    except ResumableError as exc:
        return f"(the run could not be read: {exc})"


def resume_run(bound: BoundStore, run: str) -> str:
    return "\n".join((
        f"Resume the resumable run {run!r}. Its summary, from the resumable MCP server:",
        "",
        _summary(bound, run),
        "",
        "How to resume it:",
        "1. If `live` says something works on it, do not start another: wait (watch_run), then ask again.",
        "2. If `resume.runnable` is true, run `resume.command` as it is (it names the store and skips every"
        " done unit); with the server's --allow-writes, the run_job tool starts the same runner in the"
        " background.",
        "3. Otherwise the run was written step by step (the checkpoint verbs): take the units of resume_set"
        " in order, mark each in_progress, do its work, and mark it done only once its own check passed.",
        "4. Never re-initialise a live run and never mark a unit done that was not verified; only done skips.",
        "5. When nothing is left, finalize it (done, or needs_attention with what is still open).",
    ))


def why_failed(bound: BoundStore, run: str) -> str:
    return "\n".join((
        f"Find out why the resumable run {run!r} failed. Its summary, from the resumable MCP server:",
        "",
        _summary(bound, run),
        "",
        "Read `failed`: each unit's exit code, note and the last lines of its log. For more of a log call"
        " tail_log (run, step; next_cursor reads further back); list the other failed units with"
        " list_units (state failed or timeout). `history` shows the order things happened in. Say what"
        " failed, the evidence, and the command that resumes the run once the cause is fixed"
        " (`resume.command`); a resume re-runs only what is not done.",
    ))
