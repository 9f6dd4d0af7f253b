"""The command line: ``resumable <verb> ...``.

The seed verbs are dispatched straight to ``seedcli`` without importing click (start-up time is the
whole cost of a verb called from a shell loop); everything else, and every ``--help``, goes
through the click app below. Commands owned by other modules (run, status, report) are imported
only when invoked.
"""

from __future__ import annotations

import os
import sys

from resumable import __version__
from resumable.cli.startup import SEED_VERBS as VERBS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

# name -> (module, attribute, one-line help)
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("resumable.cli.run", "run_command", "Run a job as a resumable DAG of steps."),
    "status": ("resumable.cli.status", "status_command", "Show where runs stand (read-only)."),
    "report": ("resumable.cli.report", "report_command", "Write a self-contained HTML timeline."),
    "log": ("resumable.cli.log", "log_command", "Show a run's history, one line per event."),
    "submit": ("resumable.cli.submit", "submit_command", "Record a job for workers to run (PostgreSQL store)."),
    "worker": ("resumable.cli.worker", "worker_command", "Run submitted steps on this host (PostgreSQL store)."),
    "db": ("resumable.cli.db", "db_group", "The PostgreSQL store: schema, attempts, logs."),
    "export": ("resumable.cli.transfer", "export_command", "Write a run and its history to a file."),
    "import": ("resumable.cli.transfer", "import_command", "Read a run exported from another store."),
}

SEED_HELP: dict[str, str] = {
    "init": """Start a run: init <run> --task T [--units a,b] [--id ID] [--launch JSON]
    [--required-phases p,q] [--require-validation]. Prints the run id. <run> is a run id
    (<runs-dir>/<id>.json) or a path ending in .json. Refused (exit 2) over a live run; a done or
    aborted run's files are archived first.""",
    "unit": """Set a unit's state: unit <run> <unit> <pending|in_progress|done|blocked|dep_blocked|
    failed|timeout|interrupted> [--note N] [--deps x,y]. --deps replaces the unit's dependencies.
    Demoting a done unit is refused (exit 2).""",
    "phase": "Set a phase's state: phase <run> <phase> <pending|running|done|blocked|skipped>.",
    "get": "Print the run document, or with --summary its summary: get <run> [--summary].",
    "resume": """Print the resume set: resume <run> -> {"skip":[...],"eligible":[...],
    "dep_blocked":{unit:root}} (plus unknown_deps / cycles / malformed when present).""",
    "item": "Record open findings: item <run> --json OBJ|ARRAY. Prints their stable ids.",
    "resolve": "Resolve findings: resolve <run> --ids a,b | --json '[...]'. Prints the ids moved.",
    "validation": "Record final validation: validation <run> <green|red|pass|ok|fail> [--note N].",
    "finalize": """Finish a run: finalize <run> <done|needs_attention|aborted> [--result R].
    'done' is refused (exit 2) while any unit is not done, a phase is blocked, a required phase is
    not done, a finding is open, or required validation is absent or red.""",
    "gc": """Archive done/aborted runs older than --keep-days (default 7): gc [<runs-dir>]
    [--keep-days N]. Never touches live runs; never overwrites an archived file.""",
}


def _click_app() -> Any:
    import importlib  # here, not at the top: importlib (and warnings) are not loaded at startup

    import click

    class App(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return [*VERBS, *LAZY_COMMANDS]

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            if cmd_name in LAZY_COMMANDS:
                module, attr, _ = LAZY_COMMANDS[cmd_name]
                command: click.Command = getattr(importlib.import_module(module), attr)
                return command
            if cmd_name in VERBS:
                return _seed_command(cmd_name)
            return None

    def _seed_command(name: str) -> click.Command:
        def callback() -> None:
            from resumable.cli.seed import run_verb

            ctx = click.get_current_context()
            raise SystemExit(run_verb(name, list(ctx.args)))

        return click.Command(
            name,
            callback=callback,
            help=SEED_HELP[name],
            short_help=SEED_HELP[name].split(":")[0].split(".")[0],
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


def _is_seed_call(args: list[str]) -> bool:
    return bool(args) and args[0] in VERBS and "--help" not in args and "-h" not in args


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if _is_seed_call(args):
        from resumable.cli.seed import run_verb

        return run_verb(args[0], args[1:])
    if not args or (not args[0].startswith("-") and args[0] not in (*VERBS, *LAZY_COMMANDS)):
        from resumable.cli.errors import report
        from resumable.errors import UsageError

        if not args:  # as the seed: one usage line, exit 1 (`resumable --help` has the rest)
            from resumable.cli.seed import USAGE

            return report(UsageError(USAGE.removeprefix("usage: ").join(("usage: ", ""))))
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
    if _is_seed_call(args):
        _exit_at_once(code)
    sys.exit(code)


def _exit_at_once(code: int) -> None:
    """End a seed verb without the interpreter's shutdown, when it has nothing left to do.

    Shutdown (tearing down every module, freeing every object) takes about 2 ms, an eighth of a
    whole `resumable unit` call, and does nothing a seed verb needs: its writes are fsynced
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
