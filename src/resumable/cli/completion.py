"""``resumable completion bash|zsh|fish``: the shell completion script, and what it completes.

Completion goes through click's protocol: the script a shell loads calls ``resumable`` again with
``_RESUMABLE_COMPLETE=<shell>_complete`` and the words typed so far (``COMP_WORDS`` /
``COMP_CWORD``), and prints the candidates (the launcher, ``cli.main``, hands such a call to click
even though it carries no arguments). Besides commands and options, it completes:

- run ids, for every RUN argument (``status``, ``report``, ``log``, ``reconcile``, ``rerun`` and
  the low-level verbs), from the names of the ``*.json`` files in the runs directory (``--dir`` typed
  earlier on the line, else found as every command finds it): a directory listing, nothing loaded,
  so a runs directory of thousands of large runs completes at once;
- a low-level verb's state words (``unit r a <TAB>``: the unit states; ``finalize r <TAB>``: ...);
- step ids for ``resumable run`` (its targets, ``resumable run [JOBFILE] STEP...``) and for its
  ``--explain``, from the job file's ``[steps.*]`` tables (the job file typed first, else
  ``resumable.toml`` found walking up), or the ``--step ID:COMMAND`` flags typed before them; a
  job with families of steps (or built by a Python file) is read as ``resumable run`` reads it,
  and offers each family's name and each instance (``clean``, ``clean+01``: ``+`` needs no quoting
  and is not a word break in any of the three shells, ``core.instance``).

A completion never prints an error: whatever goes wrong (no runs directory, an unreadable job
file), it offers nothing and the shell falls back to its own completion.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from resumable.cli.errors import command_class

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_RESUMABLE_COMPLETE"  # click's name for it: _<PROG_NAME>_COMPLETE
_MAX_JOB_FILE = 16 << 20  # a job file larger than this is not worth parsing for a completion

_HELP = """Print the shell completion script for SHELL (bash, zsh or fish).

\b
Load it from your shell's start-up file:
  bash (~/.bashrc):   eval "$(resumable completion bash)"
  zsh  (~/.zshrc):    eval "$(resumable completion zsh)"
  fish:               resumable completion fish > ~/.config/fish/completions/resumable.fish

Commands, options, run ids (from the runs directory), low-level verbs' states and the step ids of
`resumable run` (targets and --explain) then complete with TAB.
"""


@click.command("completion", cls=command_class(), help=_HELP,
               short_help="Print the shell completion script (bash, zsh, fish).")
@click.argument("shell", type=click.Choice(SHELLS), metavar="SHELL")
@click.pass_context
def completion_command(ctx: click.Context, shell: str) -> None:
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # one of SHELLS, which click registers
    click.echo(cls(ctx.find_root().command, {}, "resumable", COMPLETE_VAR).source(), nl=False)


# --- what completes ------------------------------------------------------------------------------


def _items(values: list[str], incomplete: str) -> list[CompletionItem]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(v) for v in values if v.startswith(incomplete)]


def _as_path(incomplete: str) -> list[CompletionItem]:
    """Leave it to the shell's own file name completion (a run given as a ``.json`` path)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def run_ids(runs_dir: str | None, store_url: str | None) -> list[str]:
    """The runs a RUN argument may name: the stems of the ``*.json`` files in the runs directory,
    sorted. Empty for a PostgreSQL store (listing it means connecting) and when there is no runs
    directory. Only names are read: no run is opened, no file read."""
    from resumable import store

    if runs_dir is None and store.store_url(store_url) is not None:
        return []
    root = store.open_backend(runs_dir).root
    with os.scandir(root) as entries:
        names = [e.name[:-5] for e in entries
                 if e.name.endswith(".json") and e.name[:1].isalnum() and e.is_file(follow_symlinks=False)]
    return sorted(names)


def complete_run(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete`` of a command's RUN argument (its ``--dir`` and ``--store`` are
    ``runs_dir`` and ``store_url``)."""
    if os.sep in incomplete or incomplete.startswith("."):
        return _as_path(incomplete)
    try:
        return _items(run_ids(ctx.params.get("runs_dir"), ctx.params.get("store_url")), incomplete)
    except Exception:
        return []


def step_ids(jobfile: str | None, steps: tuple[str, ...] | list[str] | None) -> list[str]:
    """The step ids of ``resumable run``: from ``--step ID:COMMAND`` flags when there are any, else
    the ``[steps.*]`` tables of the job file (default ``./resumable.toml``)."""
    if steps:
        return [s.split(":", 1)[0] for s in steps if ":" in s]
    import stat
    import tomllib

    if jobfile is None:
        from resumable.runner.joblocate import find_job_file

        found = find_job_file("resumable.toml")
        if found is None:
            return []
        jobfile = str(found)
    path = jobfile
    if path.endswith(".py"):
        return _loaded_ids(path)  # a Python job file: run, as `resumable run` runs it
    # Never block on a FIFO planted under the job file's name; never parse something huge.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_JOB_FILE:
            return []
        with os.fdopen(os.dup(fd), "rb") as f:
            text = f.read().decode("utf-8")
    finally:
        os.close(fd)
    try:  # rtoml, as the runner reads job files: a 100,000-step file in a fraction of a second
        import rtoml

        table = rtoml.loads(text)
    except ImportError:
        table = tomllib.loads(text)
    found = table.get("steps")
    if not isinstance(found, dict):
        return []
    if any(isinstance(t, dict) and ("params" in t or "files" in t) for t in found.values()):
        loaded = _loaded_ids(path)
        if loaded:
            return loaded
    return sorted(k for k in found if isinstance(found[k], dict))


def _loaded_ids(path: str) -> list[str]:
    """The ids of a job with families of steps, as made: every family's name, then every step and
    instance (``clean``, ``clean+01``, ...); nothing when the job does not load."""
    from resumable.runner.families import family_of
    from resumable.runner.jobfile import load_job_file

    job = load_job_file(path)
    ids = [s.id for s in job.steps]
    families = sorted({f for f in map(family_of, ids) if f is not None})
    return [*families, *sorted(ids)]


def _typed_jobfile(ctx: click.Context) -> str | None:
    """The job file typed on the line so far: the first positional argument if it is one
    (``RunOptions.split_args``). An option's incomplete value stops click's parse before the
    positionals: they are then still among the extra args."""
    from resumable.runner.options import RunOptions

    typed = tuple(ctx.params.get("args") or ()) or tuple(a for a in ctx.args if not a.startswith("-"))
    return RunOptions.split_args(typed, bool(ctx.params.get("steps")))[0]


def complete_step(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete`` of ``resumable run --explain STEP``."""
    try:
        return _items(step_ids(_typed_jobfile(ctx), ctx.params.get("steps")), incomplete)
    except Exception:
        return []


def complete_target(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete`` of ``resumable run [JOBFILE] [STEP]...``: step ids of the job file (typed
    first, else found walking up); a word that looks like a path is left to the shell."""
    if not ctx.params.get("args") and ("/" in incomplete or incomplete.startswith(".")):
        return _as_path(incomplete)
    try:
        return _items(step_ids(_typed_jobfile(ctx), ctx.params.get("steps")), incomplete)
    except Exception:
        return []


def _verb_positionals(verb: str) -> list[tuple[str, ...] | None]:
    """What each positional argument of a low-level verb completes to: "run" (run ids), "dir" (a
    directory), a tuple of words, or None (free text such as a unit id)."""
    from resumable.core.model import FINAL_STATES, PHASE_STATES, UNIT_STATES

    table: dict[str, list[tuple[str, ...] | None]] = {
        "unit": [("run",), None, UNIT_STATES],
        "phase": [("run",), None, PHASE_STATES],
        "validation": [("run",), ("green", "red", "pass", "ok", "fail")],
        "finalize": [("run",), FINAL_STATES],
        "gc": [("dir",)],
    }
    return table.get(verb, [("run",)])


def complete_low_level_verb(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    """Completion of a low-level verb's arguments. Those verbs parse their own arguments
    (``cli.lowlevel``), so click sees them as extra args: walk them with the verbs' option table."""
    from click.shell_completion import CompletionItem

    from resumable.cli.lowlevel import OPTIONS

    verb = ctx.command.name or ""
    if verb not in OPTIONS:
        return []
    values, flags = OPTIONS[verb]
    if incomplete.startswith("-"):
        return [CompletionItem(o) for o in sorted(values | flags | {"--help"}) if o.startswith(incomplete)]
    tokens = list(ctx.args)
    if tokens and tokens[-1] in values:  # the value of an option
        return [CompletionItem(incomplete, type="dir")] if tokens[-1] == "--dir" else []
    positionals: list[str] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in values and i + 1 < len(tokens):
            options[tok] = tokens[i + 1]
            i += 2
            continue
        if not tok.startswith("--"):
            positionals.append(tok)
        i += 1
    kinds = _verb_positionals(verb)
    kind = kinds[len(positionals)] if len(positionals) < len(kinds) else None
    if kind == ("dir",):
        return [CompletionItem(incomplete, type="dir")]
    if kind == ("run",):
        if os.sep in incomplete or incomplete.startswith("."):
            return _as_path(incomplete)
        try:
            return _items(run_ids(options.get("--dir"), options.get("--store")), incomplete)
        except Exception:
            return []
    return _items(list(kind), incomplete) if kind else []
