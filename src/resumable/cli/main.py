"""The command line: ``resumable <verb> ...``.

The low-level verbs are dispatched straight to their own parser (``cli.lowlevel``) without importing
click (start-up time is the whole cost of a verb called from a shell loop); everything else, and
every ``--help``, goes through the click app below. Commands owned by other modules (run, status, report) are imported
only when invoked.
"""

from __future__ import annotations

import os
import sys

from resumable import __version__
from resumable.cli.startup import LOW_LEVEL_VERBS as VERBS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

# name -> (module, attribute, one-line help), in the order `resumable --help` lists them (SECTIONS).
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("resumable.cli.run", "run_command", "Run a job as a resumable DAG of steps."),
    "status": ("resumable.cli.status", "status_command", "Show where runs stand (read-only)."),
    "report": ("resumable.cli.report", "report_command", "Write a self-contained HTML timeline."),
    "log": ("resumable.cli.log", "log_command", "Show a run's history, one line per event."),
    "rerun": ("resumable.cli.rerun", "rerun_command", "Mark units of a run to run again."),
    "reconcile": ("resumable.cli.reconcile", "reconcile_command", "Mark units done from integrated commits."),
    "doctor": ("resumable.cli.doctor", "doctor_command", "Check the installation, the store and the runs."),
    "completion": ("resumable.cli.completion", "completion_command", "Print the shell completion script."),
    "checkpoint": ("resumable.cli.checkpoint", "checkpoint_command", "The phase checkpoint ledger."),
    "guard": ("resumable.cli.guard", "guard_command", "Run one pass of a recurring job: lock, pass cap, breaker."),
    "submit": ("resumable.cli.submit", "submit_command", "Record a job for workers to run (PostgreSQL store)."),
    "worker": ("resumable.cli.worker", "worker_command", "Run submitted steps on this host (PostgreSQL store)."),
    "db": ("resumable.cli.db", "db_group", "The PostgreSQL store: schema, attempts, logs."),
    "export": ("resumable.cli.transfer", "export_command", "Write a run and its history to a file."),
    "import": ("resumable.cli.transfer", "import_command", "Read a run exported from another store."),
    "mcp": ("resumable.cli.mcp", "mcp_command", "Serve the MCP server for coding agents (stdio)."),
    "skills": ("resumable.cli.skills", "skills_group", "Agent Skills for coding agents: list, show, install."),
}

# `resumable --help`: what most users need first, then the verbs scripts call once per transition,
# then the tools that stand beside the runs.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Commands", ("run", "status", "report", "log", "rerun", "reconcile", "doctor", "completion")),
    ("Low-level verbs (one write to a run each, for scripts and agents)", VERBS),
    ("The phase ledger and the recurring-run guard", ("checkpoint", "guard")),
    ("Workers and stores", ("submit", "worker", "db", "export", "import")),
    ("For coding agents", ("mcp", "skills")),
)

_RUN = ("<run>", "a run id (<runs-dir>/<id>.json), or a path ending in .json")
_STORE = (("--dir DIR", "the runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs"
                        " walking up from here)"),
          ("--store URL", "a PostgreSQL store (default: RESUMABLE_STORE)"),
          ("-h, --help", "show this help"))

# verb -> (usage after the verb, what it does, its arguments, its own options). Shown by
# `resumable <verb> --help` only: the verbs themselves parse with cli.lowlevel, not click.
VERB_HELP: dict[str, tuple[str, str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    "init": (
        "<run> --task TEXT [--units a,b] [--id ID] [--launch JSON] [--required-phases p,q]"
        " [--require-validation] [--dir DIR] [--store URL]",
        "Start a run. Prints the run id. Refused (exit 2) over a live run; a done or aborted run's"
        " files are archived first.",
        (_RUN,),
        (("--task TEXT", "what the run is for (required)"),
         ("--units a,b", "units to create, pending"),
         ("--id ID", "the run id, when <run> is a path"),
         ("--launch JSON", 'how to resume it: {"scriptPath": ..., "args": {...}}'),
         ("--required-phases p,q", "phases that must be done before finalize done"),
         ("--require-validation", "finalize done needs a green validation")),
    ),
    "unit": (
        "<run> <unit> <state> [--note TEXT] [--deps x,y] [--dir DIR] [--store URL]",
        "Set a unit's state. Demoting a done unit is refused (exit 2).",
        (_RUN, ("<unit>", "the unit id (created if new)"),
         ("<state>", "pending, in_progress, done, blocked, dep_blocked, failed, timeout or interrupted")),
        (("--note TEXT", "a note on the unit"),
         ("--deps x,y", "the units it depends on (replaces the list)")),
    ),
    "phase": (
        "<run> <phase> <state> [--dir DIR] [--store URL]",
        "Set a phase's state.",
        (_RUN, ("<phase>", "the phase name (created if new)"),
         ("<state>", "pending, running, done, blocked or skipped")),
        (),
    ),
    "get": (
        "<run> [--summary] [--dir DIR] [--store URL]",
        "Print the run document, or its summary.",
        (_RUN,),
        (("--summary", "counts and open findings instead of the whole document"),),
    ),
    "resume": (
        "<run> [--dir DIR] [--store URL]",
        "Print the resume set. It is {\"skip\":[...],\"eligible\":[...],\"dep_blocked\":{unit:root}},"
        " plus unknown_deps, cycles and malformed when present.",
        (_RUN,),
        (),
    ),
    "item": (
        "<run> --json OBJECT|ARRAY [--dir DIR] [--store URL]",
        "Record open findings. Prints their stable ids.",
        (_RUN,),
        (("--json VALUE", "one finding (an object) or several (an array)"),),
    ),
    "resolve": (
        "<run> (--ids a,b | --json ARRAY) [--dir DIR] [--store URL]",
        "Resolve findings. Prints the ids moved.",
        (_RUN,),
        (("--ids a,b", "the finding ids"), ("--json ARRAY", "the finding ids as a JSON array")),
    ),
    "validation": (
        "<run> <status> [--note TEXT] [--dir DIR] [--store URL]",
        "Record the final validation.",
        (_RUN, ("<status>", "green or red (aliases: pass, ok, fail)")),
        (("--note TEXT", "a note on the validation"),),
    ),
    "finalize": (
        "<run> <status> [--result TEXT] [--dir DIR] [--store URL]",
        "Finish a run. 'done' is refused (exit 2) while any unit is not done, a phase is blocked, a"
        " required phase is not done, a finding is open, or required validation is absent or red.",
        (_RUN, ("<status>", "done, needs_attention or aborted")),
        (("--result TEXT", "the run's result, in a line"),),
    ),
    "gc": (
        "[<runs-dir>] [--keep-days N] [--dir DIR] [--store URL]",
        "Archive done and aborted runs not updated for --keep-days. Never touches live runs; never"
        " overwrites an archived file.",
        (("<runs-dir>", "the runs directory (default: as --dir)"),),
        (("--keep-days N", "archive runs not updated for N days (default 7)"),),
    ),
}


def _verb_help_parts(name: str) -> tuple[str, str, list[tuple[str, list[tuple[str, str]]]]]:
    """(usage, description, [(section title, [(term, text)])]) of a low-level verb's --help."""
    usage, what, arguments, options = VERB_HELP[name]
    return usage, what, [("Arguments", list(arguments)), ("Options", [*options, *_STORE])]


def _click_app() -> Any:
    import importlib  # here, not at the top: importlib (and warnings) are not loaded at startup

    import click

    class App(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return [name for _, names in SECTIONS for name in names]

        def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            # From the table above, without importing every command's module to ask its help; the
            # names padded to one width, so the sections line up.
            width = max(len(name) for _, names in SECTIONS for name in names)
            for title, names in SECTIONS:
                with formatter.section(title):
                    formatter.write_dl([(name.ljust(width), _short_help(name)) for name in names])

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            if cmd_name in LAZY_COMMANDS:
                module, attr, _ = LAZY_COMMANDS[cmd_name]
                command: click.Command = getattr(importlib.import_module(module), attr)
                return command
            if cmd_name in VERBS:
                return _verb_command(cmd_name)
            return None

    class LowLevelVerb(click.Command):
        """A low-level verb for --help and completion only: its arguments and options are listed as the
        verb's own parser (cli.lowlevel) takes them, and completed by cli.completion."""

        def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            formatter.write_usage(ctx.command_path, _verb_help_parts(self.name or "")[0])

        def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(_verb_help_parts(self.name or "")[1])

        def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            for title, rows in _verb_help_parts(self.name or "")[2]:
                with formatter.section(title):
                    formatter.write_dl(rows)

        def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
            from resumable.cli.completion import complete_low_level_verb

            return complete_low_level_verb(ctx, incomplete)

    def _verb_command(name: str) -> click.Command:
        def callback() -> None:
            from resumable.cli.lowlevel import run_verb

            ctx = click.get_current_context()
            raise SystemExit(run_verb(name, list(ctx.args)))

        what = VERB_HELP[name][1]
        return LowLevelVerb(
            name,
            callback=callback,
            help=what,
            short_help=what.split(". ")[0].rstrip("."),
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
            add_help_option=True,
        )

    @click.group(
        cls=App,
        context_settings={"help_option_names": ["-h", "--help"]},
        help="Make long multi-step work durable and resumable. Exit codes: 0 ok, 1 failure or "
        "error, 2 refused (would break the checkpoint contract), 3 no run matches, 130 "
        "interrupted (state saved).",
    )
    @click.version_option(__version__, prog_name="resumable")
    def app() -> None:
        pass

    return app


def _short_help(name: str) -> str:
    if name in LAZY_COMMANDS:
        return LAZY_COMMANDS[name][2]
    return VERB_HELP[name][1].split(". ")[0].rstrip(".") + "."


def _is_low_level_call(args: list[str]) -> bool:
    return bool(args) and args[0] in VERBS and "--help" not in args and "-h" not in args


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if _is_low_level_call(args):
        from resumable.cli.lowlevel import run_verb

        return run_verb(args[0], args[1:])
    # A shell's completion call (cli/completion.py) carries no arguments: click answers it.
    completing = not args and bool(os.environ.get("_RESUMABLE_COMPLETE"))
    if not completing and (not args or (not args[0].startswith("-") and args[0] not in (*VERBS, *LAZY_COMMANDS))):
        from resumable.cli.errors import report
        from resumable.errors import UsageError

        if not args:  # as ulpi's checkpoint.mjs: one usage line, exit 1 (`resumable --help` has the rest)
            from resumable.cli.lowlevel import USAGE

            return report(UsageError(USAGE))
        return report(UsageError(f"unknown command '{args[0]}' (resumable --help lists them)"))
    if args == ["--version"]:
        print(f"resumable, version {__version__}")
        return 0
    import click

    app = _click_app()
    try:
        result = app.main(args=args, prog_name="resumable", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException as exc:
        from resumable.cli.errors import report

        return report(exc)
    return result if isinstance(result, int) else 0


def launch() -> NoReturn:
    """The installed ``resumable`` command and ``python -m resumable``: run the process's
    arguments, then exit with the verb's status."""
    args = sys.argv[1:]
    code = main(args)
    if _is_low_level_call(args):
        _exit_at_once(code)
    sys.exit(code)


def _exit_at_once(code: int) -> None:
    """End a low-level verb without the interpreter's shutdown, when it has nothing left to do.

    Shutdown (tearing down every module, freeing every object) takes about 2 ms, an eighth of a
    whole `resumable unit` call, and does nothing a low-level verb needs: its writes are fsynced
    through raw descriptors before it returns, its lock goes with the process, it starts no
    thread and registers no exit handler. Checked rather than assumed: with an exit handler
    registered (coverage, a profiler, a .pth file) or another thread alive, this returns and the
    normal exit runs. stdout and stderr are flushed here; if that fails (a closed pipe), the
    normal exit runs too and reports it exactly as it always did."""
    threading = sys.modules.get("threading")
    if exit_handlers_registered() or (threading is not None and threading.active_count() > 1):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        return
    os._exit(code)


def exit_handlers_registered() -> bool:
    """Whether an atexit handler is registered. ``atexit._ncallbacks`` is private to CPython (there
    is no public way to ask); where it is missing the answer is "yes", so the normal exit runs.
    tests/test_launcher.py fails if the private function changes behaviour."""
    import atexit

    count = getattr(atexit, "_ncallbacks", None)
    if count is None:
        return True
    try:
        return bool(count())
    except Exception:
        return True


if __name__ == "__main__":
    launch()
