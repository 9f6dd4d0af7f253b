"""The MCP server (the SDK's ``MCPServer`` over stdio): tools, resources and prompts over one store.

Read tools are always there; the write tools are registered only with ``--allow-writes``, so a
read-only server offers no way to change a run. Every tool answers compact JSON text under 20 KB
(``answers``); every failure is a tool error with one line: ``refused (exit 2): <the CLI's message>``
for a contract refusal, ``no run (exit 3): ...``, ``error (exit 1): ...`` for bad arguments, never a
traceback. This is the only module that imports the SDK.
"""

import functools
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from resumable import __version__
from resumable.core.text import one_line
from resumable.errors import NoRunError, RefusedError, ResumableError
from resumable.mcp import answers, explain, logs, pages, prompts, runs, starter, writes
from resumable.mcp.bound import BoundStore

INSTRUCTIONS = """\
resumable keeps long multi-step work durable: a run is a set of units (steps) whose state survives
crashes; a resume skips every unit proven done. Start with run_summary (no run: the newest): it says
what failed, why (exit codes, log tails) and the exact command that resumes the run. Lists page:
pass next_cursor back (history: next_since). {writes}"""
READ_ONLY = ("This server is read-only: it was started without --allow-writes, so it has no tools that"
             " change a run (restart it with `resumable mcp --allow-writes` for those).")
WRITES = ("Writes are on (--allow-writes): init, unit, phase, item, resolve, validation, finalize, rerun and"
          " run_job change runs; the checkpoint rules still refuse (demoting a done unit, finalize done with"
          " anything open).")

KIND = {RefusedError: "refused", NoRunError: "no run"}

Run = Annotated[str, Field(description="a run id (list_runs shows them)")]
Cursor = Annotated[str | None, Field(description="next_cursor from the previous answer; omit to start")]


def failure(exc: BaseException) -> str:
    """The one line a tool error carries: the CLI's message, with its exit code."""
    if isinstance(exc, ResumableError):
        kind = next((k for cls, k in KIND.items() if isinstance(exc, cls)), "error")
        return one_line(f"{kind} (exit {exc.exit_code}): {exc}")
    text = " ".join(str(exc).split())[:300]
    return one_line(f"internal error ({type(exc).__name__}: {text}); please report it")


# What a tool returns: its answer's text, or a tool error (``is_error``) whose text is exactly the
# one line ``failure`` makes (raising ToolError would have the SDK prefix it).
Reply = str | CallToolResult


def tool_body(bound: BoundStore, fn: Callable[..., dict[str, Any]], locked: bool = True) -> Callable[..., Reply]:
    """``fn`` as a tool: its answer as bounded JSON text; every failure a one-line tool error."""

    @functools.wraps(fn)
    def call(**kwargs: Any) -> Reply:
        try:
            if not locked:
                return answers.answer(fn(bound, **kwargs))
            with bound.lock:
                return answers.answer(fn(bound, **kwargs))
        except Exception as exc:
            return CallToolResult(content=[TextContent(type="text", text=failure(exc))], is_error=True)

    return call


def build(bound: BoundStore) -> MCPServer:
    server: MCPServer = MCPServer(
        "resumable", version=__version__, log_level="WARNING",
        instructions=INSTRUCTIONS.format(writes=WRITES if bound.allow_writes else READ_ONLY))
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    add_reads(server, bound, read)
    add_resources(server, bound)
    add_prompts(server, bound)
    if bound.allow_writes:
        add_writes(server, bound)
    return server


def add_reads(server: MCPServer, bound: BoundStore, read: ToolAnnotations) -> None:
    def tool(fn: Callable[..., Reply]) -> None:
        server.add_tool(fn, annotations=read, structured_output=False)

    def list_runs(cursor: Cursor = None,
                  limit: Annotated[int, Field(description="runs per page, 1-200")] = 20) -> Reply:
        """Every run in the store, newest first: status, unit counts (total, done, by state) and age."""
        return tool_body(bound, runs.list_runs)(cursor=cursor, limit=limit)

    def run_summary(run: Annotated[str | None, Field(description="a run id; omit for the newest run")] = None,
                    ) -> Reply:
        """One run: status, counts, what failed and why (exit code, note, last log lines), open findings,
        whether anything works on it now, and resume: the exact command that resumes it (it skips every
        done unit), or why no command does."""
        return tool_body(bound, runs.run_summary)(run=run)

    def resume_set(run: Run, cursor: Cursor = None,
                   limit: Annotated[int, Field(description="units per page, 1-1000")] = 200) -> Reply:
        """What a resume would do: how many units it skips (done), then the eligible units and the
        dep-blocked ones with the unit each waits on."""
        return tool_body(bound, runs.resume_set)(run=run, cursor=cursor, limit=limit)

    def list_units(run: Run,
                   state: Annotated[str | None, Field(description="pending, in_progress (running), done, failed,"
                                                      " timeout, blocked, dep_blocked, interrupted, malformed,"
                                                      " removed; omit for all")] = None,
                   cursor: Cursor = None,
                   limit: Annotated[int, Field(description="units per page, 1-1000")] = 200,
                   detail: Annotated[bool, Field(description="add needs, times and log paths")] = False) -> Reply:
        """A run's units in one state, in the run's order; done and pending ones by id only unless
        detail. Each unit comes once across the pages."""
        return tool_body(bound, pages.list_units)(run=run, state=state, cursor=cursor, limit=limit, detail=detail)

    def history(run: Run,
                since: Annotated[int, Field(description="only events after this sequence number")] = 0,
                limit: Annotated[int, Field(description="events per page, 1-1000")] = 100) -> Reply:
        """A run's recorded events, oldest first (every write and attempt); next_since pages on."""
        return tool_body(bound, pages.history)(run=run, since=since, limit=limit)

    def tail_log(run: Run,
                 step: Annotated[str | None, Field(description="the step (unit) whose log to read; omit for"
                                                   " the output of a runner this server started")] = None,
                 attempt: Annotated[int | None, Field(description="the attempt number; default the last")] = None,
                 cursor: Annotated[str | None, Field(description="next_cursor: the part of the log before")] = None,
                 ) -> Reply:
        """The end of a step's log (about 10 KB); next_cursor reads further back."""
        return tool_body(bound, logs.tail_log)(run=run, step=step, attempt=attempt, cursor=cursor)

    def explain_job(jobfile: Annotated[str | None, Field(description="a .toml job file, relative to the"
                                                         " server's directory; default resumable.toml")] = None,
                    step: Annotated[str | None, Field(description="one step only")] = None,
                    targets: Annotated[list[str] | None, Field(description="steps to run with all they"
                                                               " need (make's targets)")] = None,
                    cursor: Cursor = None,
                    limit: Annotated[int, Field(description="steps per page, 1-1000")] = 200) -> Reply:
        """What `resumable run` would do with the job now, and why: each step run or skip with its
        reason (never ran, failed last time, command changed, done...). Runs and writes nothing."""
        return tool_body(bound, explain.explain)(jobfile=jobfile, step=step, targets=targets, cursor=cursor,
                                                 limit=limit)

    def watch_run(run: Run,
                  timeout: Annotated[int, Field(description="seconds to wait, 0-300")] = 30) -> Reply:
        """Wait until the run changes (a step ends, a state is written) or the timeout passes, then its
        summary; at once for a run nothing works on."""
        return tool_body(bound, runs.watch_run, locked=False)(run=run, timeout=timeout)

    for fn in (list_runs, run_summary, resume_set, list_units, history, tail_log):
        tool(fn)
    server.add_tool(explain_job, name="explain", annotations=read, structured_output=False)
    tool(watch_run)


def add_writes(server: MCPServer, bound: BoundStore) -> None:
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    def init(task: Annotated[str, Field(description="what the run is for")],
             run: Annotated[str | None, Field(description="the run id (default run-<UTC time>)")] = None,
             units: Annotated[list[str] | None, Field(description="units to create, pending")] = None,
             required_phases: Annotated[list[str] | None, Field(description="phases finalize done needs")] = None,
             require_validation: bool = False,
             launch: Annotated[dict[str, Any] | None, Field(description='how to resume it: {"scriptPath", "args"}')]
             = None) -> Reply:
        """Start a run. Refused while a live run has this id (resume it instead); a done or aborted run's
        files are archived first."""
        return tool_body(bound, writes.init)(task=task, run=run, units=units, required_phases=required_phases,
                                             require_validation=require_validation, launch=launch)

    def unit(run: Run, unit: Annotated[str, Field(description="the unit id (created if new)")],
             state: Annotated[str, Field(description="pending, in_progress, done, blocked, dep_blocked, failed,"
                                         " timeout or interrupted")],
             note: str | None = None,
             deps: Annotated[list[str] | None, Field(description="the units it needs (replaces the list)")] = None,
             ) -> Reply:
        """Set a unit's state. Mark done only what is complete and verified; demoting a done unit is
        refused (use rerun)."""
        return tool_body(bound, writes.unit)(run=run, unit=unit, state=state, note=note, deps=deps)

    def phase(run: Run, phase: str,
              state: Annotated[str, Field(description="pending, running, done, blocked or skipped")]) -> Reply:
        """Set a phase's state."""
        return tool_body(bound, writes.phase)(run=run, phase=phase, state=state)

    def item(run: Run, items: Annotated[Any, Field(description="a finding (an object) or a list of them")]) -> Reply:
        """Record open findings; returns their stable ids."""
        return tool_body(bound, writes.item)(run=run, items=items)

    def resolve(run: Run, ids: list[str]) -> Reply:
        """Resolve open findings by id; returns the ids moved."""
        return tool_body(bound, writes.resolve)(run=run, ids=ids)

    def validation(run: Run, status: Annotated[str, Field(description="green or red")],
                   note: str | None = None) -> Reply:
        """Record the final validation."""
        return tool_body(bound, writes.validation)(run=run, status=status, note=note)

    def finalize(run: Run, status: Annotated[str, Field(description="done, needs_attention or aborted")],
                 result: str | None = None) -> Reply:
        """Finish a run. done is refused while a unit is not done, a phase is blocked, a required phase is
        not done, a finding is open, or a required validation is absent or red."""
        return tool_body(bound, writes.finalize)(run=run, status=status, result=result)

    def rerun(run: Run, units: list[str], reason: str | None = None) -> Reply:
        """Send units back to pending, done ones included, recording why: the next resume runs them."""
        return tool_body(bound, writes.rerun)(run=run, units=units, reason=reason)

    def run_job(jobfile: Annotated[str | None, Field(description="a .toml job file, relative to the server's"
                                                     " directory; default resumable.toml")] = None,
                targets: Annotated[list[str] | None, Field(description="steps to run with all they need")] = None,
                jobs: Annotated[int, Field(description="steps at once, 0 = one per CPU")] = 1,
                keep_going: Annotated[bool, Field(description="run every step not behind a failed one")] = False,
                ) -> Reply:
        """Start `resumable run` for a job in the background and return at once with the run's id. It runs
        the job's commands; a re-run skips what is done. Follow it with watch_run and run_summary."""
        return tool_body(bound, starter.run_job)(jobfile=jobfile, targets=targets, jobs=jobs, keep_going=keep_going)

    for fn in (init, unit, phase, item, resolve, validation, finalize, rerun, run_job):
        server.add_tool(fn, annotations=write, structured_output=False)


def resource_text(bound: BoundStore, fn: Callable[..., dict[str, Any]], **kwargs: Any) -> str:
    try:
        with bound.lock:
            return answers.answer(fn(bound, **kwargs))
    except Exception as exc:
        raise ResourceError(failure(exc)) from None


def document(bound: BoundStore, run: str) -> dict[str, Any]:
    """A run's document when it fits one answer; else its summary, saying how to page its units."""
    with bound.lock:
        handle = bound.handle(run)
        doc = dict(handle.read())
    if answers.size(doc) <= answers.ANSWER_LIMIT - 200:
        return doc
    out = runs.run_summary(bound, run)
    out["note"] = "the document is too large for one answer: this is its summary; page its units with list_units"
    return runs.fit(out)


def add_resources(server: MCPServer, bound: BoundStore) -> None:
    @server.resource("resumable://runs", name="runs", mime_type="application/json",
                     description="every run in the store, newest first (the first page of list_runs)")
    def all_runs() -> str:
        return resource_text(bound, runs.list_runs)

    @server.resource("resumable://runs/{run}", name="run", mime_type="application/json",
                     description="a run's document (its summary when the document is too large)")
    def one_run(run: str) -> str:
        return resource_text(bound, document, run=run)

    @server.resource("resumable://runs/{run}/logs/{step}", name="log", mime_type="application/json",
                     description="the end of a step's last log")
    def step_log(run: str, step: str) -> str:
        return resource_text(bound, logs.tail_log, run=run, step=step)


def add_prompts(server: MCPServer, bound: BoundStore) -> None:
    @server.prompt(name="resume_run", description="Resume a run: its summary, and how to resume it safely")
    def resume_run(run: str) -> str:
        with bound.lock:
            return prompts.resume_run(bound, run)

    @server.prompt(name="why_failed", description="Why did this run fail: the failures, their logs, what next")
    def why_failed(run: str) -> str:
        with bound.lock:
            return prompts.why_failed(bound, run)


def serve(bound: BoundStore) -> None:
    """Serve over stdin and stdout until the client closes them."""
    try:
        build(bound).run("stdio")
    finally:
        bound.close()
