"""The resume recipe: how to resume a run, classified from its persisted launch descriptor. Pure.

Kinds (run-status.mjs's four, plus our own):
- ``resumable``: written by `resumable run` as ``{"kind": "resumable", "argv": [...], "cwd": ...}``;
  runnable, replayed as its exact argv, each token shell-quoted.
- ``codex-cli``: an ulpi descriptor whose scriptPath basename is ``pipeline.mjs`` with
  ``args.command == "resume"`` and a non-blank ``args.run``; runnable.
- ``legacy-workflow``: any other well-typed ulpi descriptor; migration-only, never runnable.
- ``no-launch``: no descriptor, or a malformed one; never runnable.
- ``unreadable``: the run file itself could not be read.

A non-runnable run never gets a command: printing a guessed command is how a resume re-does
finished work or runs the wrong thing.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from resumable.core import jsonio, plan
from resumable.core.model import json_type_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.core.types import ResumeRecipe, ResumeSet

_BARE: Final = re.compile(r"^[A-Za-z0-9._/@:=+-]+$")
# pipeline.mjs's SAFE_ID: an id it rejects must not be printed as a command.
_PIPELINE_SAFE_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def shquote(token: str) -> str:
    """run-status.mjs's shquote: bare when only safe characters, else single-quoted ('\\'' for ')."""
    if _BARE.match(token):
        return token
    return "'" + token.replace("'", "'\\''") + "'"


def resume_set(doc: Mapping[str, Any]) -> ResumeSet:
    """The checkpoint.mjs-shaped resume set ``{skip, eligible, dep_blocked: {unit: root}}``, null-safe, in
    O(N), without the planner's diagnostics (their cycle search is not worth a status view's time).
    Units of steps removed from the job file are left out: a re-run will not run them, and the
    view counts them in no done/total (checkpoint.mjs's own ``resume`` verb still lists every unit)."""
    units = doc.get("units")
    if isinstance(units, dict) and any(isinstance(u, dict) and u.get("removed") is True
                                       for u in units.values()):
        kept = {uid: u for uid, u in units.items() if not (isinstance(u, dict) and u.get("removed") is True)}
        doc = {**doc, "units": kept}
    return plan.resume_set(doc, diagnostics=False)


def set_line(rs: Mapping[str, Any]) -> str:
    return (
        f"skip {len(rs['skip'])} done · re-run {len(rs['eligible'])} eligible"
        f" · {len(rs['dep_blocked'])} dep-blocked"
    )


def _nonblank(v: object) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _shell(argv: list[str], cwd: str | None, here: str | None) -> str:
    cmd = command(argv)
    # The recorded argv may hold relative paths (job file, --dir); they only mean the same thing
    # from the directory the run was launched in.
    if cwd and cwd != here:
        return f"cd {shquote(cwd)} && {cmd}"
    return cmd


def launched_by(doc: Mapping[str, Any]) -> str | None:
    """What works on the run while it lives, from its launch descriptor: ``runner`` (`resumable run`
    and resumable's other commands), ``submit`` (`resumable submit`: its steps run on workers),
    ``script`` (a program using the Python API, which records its interpreter as the command; or an
    interactive session, which records no command but did start a session); None for runs of other
    tools (the low-level verbs, an agent), which hold no lease."""
    launch = doc.get("launch")
    if isinstance(launch, dict) and launch.get("kind") == "resumable":
        argv = launch.get("argv")
        if not (isinstance(argv, list) and argv and isinstance(argv[0], str)):
            return None
        if posixpath.basename(argv[0]) != "resumable":
            return "script"
        return "submit" if len(argv) > 1 and argv[1] == "submit" else "runner"
    return "script" if "sessionStartedAt" in doc else None


def with_store(argv: list[str], store: tuple[str, str] | None) -> list[str]:
    """A `resumable` command line naming the store it acts on (``store``: ``("--dir", DIR)`` or
    ``("--store", URL)``), unless it names one already: a hint must paste into any shell, not only
    into one where RESUMABLE_DIR or RESUMABLE_STORE happen to be set as they were."""
    if store is None or not argv or posixpath.basename(argv[0]) != "resumable":
        return argv
    if any(t in _STORE_FLAGS or t.split("=", 1)[0] in _STORE_FLAGS for t in argv[1:]):
        return argv
    return [*argv, *store]


_STORE_FLAGS: Final = frozenset(("--dir", "--state-dir", "--store"))


def command(argv: list[str]) -> str:
    """A command line to print, every token shell-quoted."""
    return " ".join(shquote(t) for t in argv)


def worker_line(run_id: object, store: tuple[str, str] | None) -> str:
    """The command that starts a worker on this host for the run."""
    return command(with_store(["resumable", "worker", "--run", str(run_id)], store))


def finish_line(doc: Mapping[str, Any], target: str, store_url: str | None) -> str:
    """The line that finishes a run a script left open (``run.finish()`` from the shell), run with
    the interpreter the script ran with. ``target``: the run's file (a runs directory) or its id."""
    launch = doc.get("launch")
    argv = launch.get("argv") if isinstance(launch, dict) else None
    python = argv[0] if isinstance(argv, list) and argv and isinstance(argv[0], str) else "python3"
    # JSON string literals are Python's too, and their double quotes need no escaping in the shell's
    # single quotes.
    where = f", store_url={jsonio.stdlib_dumps(store_url)}" if store_url else ""
    code = f"import resumable; print(resumable.open_run({jsonio.stdlib_dumps(target)}{where}).finish())"
    return command([python, "-c", code])


def _resumable(
    launch: Mapping[str, Any],
    run_id: Any,
    rs: ResumeSet,
    here: str | None,
    store: tuple[str, str] | None,
) -> ResumeRecipe | None:
    """The descriptor of a `resumable` launch, or None when its argv is not a list of strings."""
    argv = launch.get("argv")
    if not (isinstance(argv, list) and argv and all(isinstance(t, str) for t in argv)):
        return None
    cwd = launch.get("cwd")
    cwd = cwd if _nonblank(cwd) else None
    argv = with_store(list(argv), store)
    return {
        "runnable": True,
        "kind": "resumable",
        "run": run_id,
        "command": argv[0],
        "argv": argv,
        "cwd": cwd,
        "shell": _shell(list(argv), cwd, here),
        "resumeSet": rs,
    }


def _pipeline(
    run: Any, run_id: Any, rs: ResumeSet, no_launch: Callable[[str], ResumeRecipe]
) -> ResumeRecipe:
    """The descriptor of a pipeline.mjs `resume --run <run>` launch."""
    # Two bugs of run-status.mjs fixed here: a descriptor naming another run was printed as if it were this
    # one's, and an id the pipeline's SAFE_ID rejects was printed as a command that fails.
    if isinstance(run_id, str) and run != run_id:
        return no_launch(f"the launch descriptor resumes run {run!r}, not this run {run_id!r}")
    if not _PIPELINE_SAFE_ID.match(run) or ".." in run:
        return no_launch(f"run id {run!r} is not one pipeline.mjs accepts")
    # Exactly run-status.mjs's command: its users run it from the pipeline's directory.
    argv = ["pipeline.mjs", "resume", "--run", run]
    return {
        "runnable": True,
        "kind": "codex-cli",
        "run": run,
        "command": "node",
        "argv": argv,
        "shell": command(["node", *argv]),
        "resumeSet": rs,
    }


def classify(
    doc: Mapping[str, Any],
    file: str,
    *,
    here: str | None = None,
    rs: ResumeSet | None = None,
    store: tuple[str, str] | None = None,
) -> ResumeRecipe:
    """The resume descriptor of a readable run (run-status.mjs's `--resume --json` shape).

    ``file`` is the run's absolute location; ``here`` is the caller's working directory: a
    `cd <cwd> &&` prefix is added when it differs from the directory the run was launched in.
    ``rs`` is a precomputed resume set; ``store`` the option naming the store the run was read
    from, added to a `resumable` command that names none (``with_store``)."""
    if rs is None:
        rs = resume_set(doc)
    run_id = doc.get("id")
    launch = doc.get("launch")

    def no_launch(reason: str) -> ResumeRecipe:
        return {
            "runnable": False,
            "kind": "no-launch",
            "migrationOnly": True,
            "reason": reason,
            "resumeSet": rs,
        }

    if not isinstance(launch, dict):
        if launch is None:
            return no_launch("the run has no launch descriptor")
        return no_launch(f"the launch descriptor is not an object (it is {json_type_name(launch)})")

    if launch.get("kind") == "resumable":
        return _resumable(launch, run_id, rs, here, store) or no_launch(
            "the resumable launch descriptor has no argv list of strings")

    script = launch.get("scriptPath")
    if not _nonblank(script):
        return no_launch("the launch descriptor has no scriptPath")
    assert isinstance(script, str)
    args = launch.get("args")
    if "args" in launch and not isinstance(args, dict):
        return no_launch("the launch descriptor's args is not an object")
    args = args if isinstance(args, dict) else {}

    if (
        posixpath.basename(script) == "pipeline.mjs"
        and args.get("command") == "resume"
        and _nonblank(args.get("run"))
    ):
        return _pipeline(args["run"], run_id, rs, no_launch)

    return {
        "runnable": False,
        "kind": "legacy-workflow",
        "migrationOnly": True,
        "reason": "the launch descriptor is not a command this tool or pipeline.mjs can replay",
        "legacyLaunch": dict(launch),  # passed through unchanged, as run-status.mjs's --json does
        "resumeSet": rs,
    }


def unreadable(file: str, reason: str) -> ResumeRecipe:
    return {
        "runnable": False,
        "kind": "unreadable",
        "migrationOnly": True,
        "reason": reason,
        "file": file,
    }




def render_text(desc: Mapping[str, Any], doc: Mapping[str, Any] | None = None, file: str | None = None, *,
                notes: Sequence[str] | None = None) -> list[str]:
    """The `--resume` text: `#` comment lines (pasteable into a shell) and, only for a runnable
    recipe, the command. A legacy descriptor is shown as run-status.mjs shows it, with ``args.statusFile``
    set to the run's file (``file``) when it has none. ``notes``: what works on a live run now (its
    comment lines, ``view.liveness``), when a reader could ask the store."""
    kind = desc.get("kind")
    status = doc.get("status") if doc is not None else None
    run = doc.get("id") if doc is not None else None
    out: list[str] = []
    if kind == "unreadable":
        out.append(f"# UNREADABLE: {desc.get('file')}: {desc.get('reason')}")
        out.append("# nothing can be resumed from a file that cannot be read")
        return out
    rs = desc.get("resumeSet") or {"skip": [], "eligible": [], "dep_blocked": {}}
    if status == "done":
        out.append(f"# run {run} is done: every unit converged, there is nothing to resume")
    elif status == "aborted":
        out.append(f"# run {run} was aborted: it is not meant to be resumed")
    elif notes is not None:
        out.extend(notes)
    elif status in ("running", "initializing"):
        out.append(f"# run {run} is marked {status}: resume only once its runner has stopped")
    if desc.get("runnable"):
        out.append(f"# resume run {desc.get('run')} ({kind}):")
        out.append(str(desc.get("shell")))
        out.append(f"# {set_line(rs)}")
        return out
    if kind == "legacy-workflow":
        out.append("# MIGRATION-ONLY: this run was launched by a legacy workflow script;")
        out.append("# it is shown for reference and cannot be replayed as a command.")
        out.append("# Re-launch it with `resumable run` to make it resumable.")
        out.append(f"# {set_line(rs)}")
        legacy = desc.get("legacyLaunch")
        shown = dict(legacy) if isinstance(legacy, dict) else {}
        args = shown.get("args")
        shown_args = dict(args) if isinstance(args, dict) else {}
        if file is not None:
            shown_args.setdefault("statusFile", file)
        shown = {"scriptPath": shown.get("scriptPath"), "args": shown_args}
        out.extend(jsonio.stdlib_dumps(shown, indent=2, ensure_ascii=False).splitlines())
        return out
    out.append(f"# NON-RUNNABLE: {desc.get('reason')}.")
    out.append("# No command is printed; below is what a resume would skip and re-run.")
    out.append(f"# {set_line(rs)}")
    out.extend(jsonio.stdlib_dumps(rs, indent=2).splitlines())
    return out
