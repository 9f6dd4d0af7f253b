"""``resumable checkpoint ...``: OmniNode's ``checkpoint_manager.py`` verbs, flags and JSON, plus
``resume-point`` and ``show``. Parse, call ``resumable.ledger``, print; nothing else lives here.

JSON goes to stdout: success payloads pretty-printed (indent 2), error payloads compact
``{"success": false, "error": ...}`` as OmniNode's. Exit codes are OmniNode's: ``write`` exits 0
even when it fails (callers treat writes as non-blocking and read ``success``) unless ``--strict``;
``read``/``validate``/``list``/``resume-point`` exit 0 on success (a valid checkpoint, for
validate) and 1 otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import click

from resumable.errors import ResumableError

_BASE_HELP = "Checkpoint root (default: $ONEX_STATE_DIR/checkpoints, else ~/.claude/checkpoints)."
_PHASES_HELP = "TOML file declaring the pipeline's phases and payloads (default: the five OmniNode phases)."


def _common(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--phases", "phases_file", metavar="FILE", help=_PHASES_HELP)(func)
    return click.option("--base-dir", metavar="DIR", help=_BASE_HELP)(func)


def _pretty(data: Mapping[str, object]) -> None:
    from resumable.core import jsonio

    sys.stdout.write(jsonio.stdlib_dumps(data, indent=2, default=str) + "\n")


def _compact(data: Mapping[str, object]) -> None:
    from resumable.core import jsonio

    sys.stdout.write(jsonio.stdlib_dumps(data, default=str) + "\n")


def _fail(message: str, code: int, *, stderr: bool = True, **extra: Any) -> int:
    _compact({**extra, "success": False, "error": message})
    if stderr:
        _stderr(message)
    return code


def _stderr(message: str) -> None:
    """One line on stderr; characters from data that a terminal would act on are escaped."""
    from resumable.ledger.show import escape

    sys.stderr.write(f"resumable: {escape(message)}\n")


def _base(base_dir: str | None) -> str | None:
    import os

    return None if base_dir is None else os.path.abspath(os.path.expanduser(base_dir))


def _phase_error(phase: str, phases_file: str | None) -> str | None:
    """OmniNode's JSON message for a phase outside the list (click's Choice would print usage)."""
    from resumable.ledger.api import schema_of

    phases = schema_of(phases_file).phases
    return None if phases.get(phase) else phases.invalid_phase(phase)


@click.group("checkpoint", context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True,
             no_args_is_help=False)
@click.option("-v", "--verbose", is_flag=True, help="Say on stderr which files were written, read or skipped.")
@click.pass_context
def checkpoint_command(ctx: click.Context, verbose: bool) -> None:
    """Phase checkpoint ledger: one append-only YAML file per completed pipeline phase.

    Drop-in for OmniNode's checkpoint_manager.py (same flags, files and JSON). Files live in
    <base>/<ticket>/<run-uuid>/phase_<N>_<phase>_a<attempt>.yaml. Exit codes: write 0 (check
    "success"; --strict: 1 on failure); read/validate/list/resume-point 0 on success, 1 otherwise.
    """
    ctx.obj = verbose
    if ctx.invoked_subcommand is None:  # bare `resumable checkpoint`: the help, not a usage error
        click.echo(ctx.get_help())


def _say(message: str) -> None:
    if click.get_current_context().obj:  # -v on the group (click hands a group's obj to its commands)
        _stderr(message)


@checkpoint_command.command("write")
@click.option("--ticket-id", required=True, help="Ticket id: 1-64 of A-Z a-z 0-9 . _ -")
@click.option("--run-id", required=True, help="Pipeline run id: a UUID, or a short id (mapped to OmniNode's UUIDv5).")
@click.option("--phase", required=True, help="Phase that completed.")
@click.option("--attempt", metavar="N", help="Attempt number; omitted: the next free one, claimed atomically.")
@click.option("--repo-commit-map", default="{}", metavar="JSON",
              help='Repo name -> commit SHA, e.g. \'{"repo": "a1b2c3d"}\'.')
@click.option("--artifact-paths", default="[]", metavar="JSON", help="JSON array of relative artifact paths.")
@click.option("--payload", default="{}", metavar="JSON", help="JSON object with the phase's payload fields.")
@click.option("--timestamp", metavar="ISO", help="Completion time, ISO-8601 with a timezone (default: now).")
@click.option("--strict", is_flag=True, help="Exit 1 when the write fails (default: exit 0, as OmniNode's).")
@_common
def write_command(ticket_id: str, run_id: str, phase: str, attempt: str | None, repo_commit_map: str,
                  artifact_paths: str, payload: str, timestamp: str | None, strict: bool, base_dir: str | None,
                  phases_file: str | None) -> None:
    """Record that a phase completed (never overwrites: a new attempt is a new file)."""
    from resumable.core import jsonio

    code = 1 if strict else 0
    try:
        parsed = [jsonio.stdlib_loads(text) if text else default
                  for text, default in ((repo_commit_map, {}), (artifact_paths, []), (payload, {}))]
    except (ValueError, RecursionError) as exc:
        raise SystemExit(_fail(f"Invalid JSON argument: {exc}", code)) from None
    commit_map, paths, body = parsed
    for value, kind, flag in ((commit_map, dict, "--repo-commit-map must be a JSON object"),
                              (paths, list, "--artifact-paths must be a JSON array"),
                              (body, dict, "--payload must be a JSON object")):
        if not isinstance(value, kind):
            raise SystemExit(_fail(flag, code))
    number: int | None = None
    if attempt is not None:
        if not (attempt.isascii() and attempt.isdigit()):
            raise SystemExit(_fail(f"Invalid --attempt: {attempt!r} (expected a whole number >= 1)", code))
        number = int(attempt)
    try:
        invalid = _phase_error(phase, phases_file)
        if invalid:
            raise SystemExit(_fail(invalid, code))
        from resumable.ledger import api

        result = api.write(ticket_id, run_id, phase, body, attempt=number, repo_commit_map=commit_map,
                           artifact_paths=paths, timestamp=timestamp, base_dir=_base(base_dir),
                           phases=phases_file)
    except ResumableError as exc:
        raise SystemExit(_fail(f"Write failed: {exc}", code)) from None
    _say(f"wrote {result.checkpoint_path}")
    _pretty({"success": True, "checkpoint_path": result.checkpoint_path, "correlation_id": result.correlation_id})


def _phase_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--phase", required=True, help="Phase name.")(func)
    func = click.option("--run-id", required=True, help="Pipeline run id (UUID or short id).")(func)
    return click.option("--ticket-id", required=True, help="Ticket id.")(func)


@checkpoint_command.command("read")
@_phase_options
@_common
def read_command(ticket_id: str, run_id: str, phase: str, base_dir: str | None, phases_file: str | None) -> None:
    """Print the newest valid checkpoint of a phase (newer corrupt attempts are named in "warnings")."""
    from resumable.ledger.model import to_dict

    try:
        invalid = _phase_error(phase, phases_file)
        if invalid:
            raise SystemExit(_fail(invalid, 1))
        from resumable.ledger import api

        result = api.read(ticket_id, run_id, phase, base_dir=_base(base_dir), phases=phases_file)
    except ResumableError as exc:
        raise SystemExit(_fail(f"Read failed: {exc}", 1)) from None
    for warning in result.warnings:
        _say(warning)
    out: dict[str, object] = {"success": result.success, "correlation_id": result.correlation_id}
    if result.checkpoint is not None:
        out["checkpoint"] = to_dict(result.checkpoint)
    else:
        out["error"] = result.error
    out["warnings"] = list(result.warnings)
    _pretty(out)
    if not result.success:
        _stderr(result.error or "Checkpoint not found")  # not found, or found only corrupt: one line, as any failure
    raise SystemExit(0 if result.success else 1)


@checkpoint_command.command("validate")
@_phase_options
@click.option("--root", metavar="DIR", help="Also check that every artifact path exists under DIR.")
@click.option("--repo", "repos", multiple=True, metavar="[NAME=]DIR",
              help="Also check that commit SHAs exist in this git repository (NAME=DIR: for repo_commit_map[NAME]).")
@_common
def validate_command(ticket_id: str, run_id: str, phase: str, root: str | None, repos: tuple[str, ...],
                     base_dir: str | None, phases_file: str | None) -> None:
    """Read a phase's newest valid checkpoint and validate it; exit 0 only when it is valid."""
    from resumable.ledger.model import to_dict

    try:
        invalid = _phase_error(phase, phases_file)
        if invalid:
            raise SystemExit(_fail(invalid, 1, is_valid=False))
        from resumable.ledger import api

        result = api.validate_stored(ticket_id, run_id, phase, root=root, repos=list(repos),
                                     base_dir=_base(base_dir), phases=phases_file)
    except ResumableError as exc:
        raise SystemExit(_fail(f"Validate failed: {exc}", 1, is_valid=False)) from None
    except Exception as exc:
        # Every validate answer carries is_valid (OmniNode's lacked it on an exception); the defect
        # itself still reaches the error table, as one line.
        _compact({"is_valid": False, "success": False, "error": f"Validate failed: {type(exc).__name__}"})
        raise
    out: dict[str, object] = {"is_valid": result.is_valid, "success": result.success, "errors": list(result.errors),
                           "warnings": list(result.warnings), "correlation_id": result.correlation_id}
    if result.checkpoint is not None:
        out["checkpoint"] = to_dict(result.checkpoint)
    _pretty(out)
    if not result.is_valid:
        more = f" (and {len(result.errors) - 1} more)" if len(result.errors) > 1 else ""
        _stderr(f"{result.errors[0]}{more}" if result.errors else "Checkpoint is not valid")
    raise SystemExit(0 if result.is_valid else 1)


@checkpoint_command.command("list")
@click.option("--ticket-id", required=True, help="Ticket id.")
@click.option("--run-id", help="Only this run (UUID or short id).")
@_common
def list_command(ticket_id: str, run_id: str | None, base_dir: str | None, phases_file: str | None) -> None:
    """List a ticket's valid checkpoints: by run (first write), phase, attempt. No cap."""
    from resumable.ledger import api
    from resumable.ledger.model import to_dict

    try:
        result = api.list_checkpoints(ticket_id, run_id, base_dir=_base(base_dir), phases=phases_file)
    except ResumableError as exc:
        raise SystemExit(_fail(f"List failed: {exc}", 1)) from None
    for warning in result.warnings:
        _say(warning)
    _pretty({"success": True, "count": result.count, "checkpoints": [to_dict(c) for c in result.checkpoints],
             "correlation_id": result.correlation_id, "warnings": list(result.warnings)})


@checkpoint_command.command("resume-point")
@click.option("--ticket-id", required=True, help="Ticket id.")
@click.option("--run-id", required=True, help="Pipeline run id (UUID or short id).")
@click.option("--root", metavar="DIR", help="Trust a phase only if its artifact paths exist under DIR.")
@click.option("--repo", "repos", multiple=True, metavar="[NAME=]DIR",
              help="Trust a phase only if its commit SHAs exist in this git repository.")
@_common
def resume_point_command(ticket_id: str, run_id: str, root: str | None, repos: tuple[str, ...],
                         base_dir: str | None, phases_file: str | None) -> None:
    """Print the first phase without a trustworthy checkpoint (where a --skip-to resume starts)
    and why each earlier phase is trusted. "resume_phase" is null when every phase is done."""
    from resumable.ledger.resume import resume_point

    try:
        point = resume_point(ticket_id, run_id, root=root, repos=list(repos), base_dir=_base(base_dir),
                             phases=phases_file)
    except ResumableError as exc:
        raise SystemExit(_fail(f"Resume-point failed: {exc}", 1)) from None
    _pretty({"success": True, "ticket_id": point.ticket_id, "run_id": point.run_id,
             "resume_phase": point.resume_phase,
             "phases": [{"phase": p.phase, "ordinal": p.ordinal, "trusted": p.trusted,
                         "attempt_number": p.attempt_number, "checkpoint_path": p.checkpoint_path,
                         "reason": p.reason} for p in point.phases],
             "warnings": list(point.warnings), "correlation_id": point.correlation_id})


@checkpoint_command.command("show")
@click.argument("ticket_id")
@click.option("--run-id", help="Only this run (UUID or short id).")
@_common
def show_command(ticket_id: str, run_id: str | None, base_dir: str | None, phases_file: str | None) -> None:
    """Print a table of a ticket's runs x phases x attempts, with validity (for people)."""
    from resumable.ledger import api, layout, show

    base = layout.resolve_base_dir(_base(base_dir))
    runs = api.stored_runs(ticket_id, run_id, base_dir=base, phases=phases_file)
    sys.stdout.write(show.render(ticket_id, base, runs, api.schema_of(phases_file)))
