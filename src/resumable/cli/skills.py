"""``resumable skills``: the Agent Skills shipped with resumable: list, show, install."""

from __future__ import annotations

import os
import sys

import click

from resumable import __version__
from resumable.cli.errors import command_class
from resumable.errors import InvalidInputError, UsageError


@click.group("skills", short_help="Agent Skills for coding agents: list, show, install.")
def skills_group() -> None:
    """The Agent Skills shipped with resumable (SKILL.md folders for Claude Code, Codex and other agents
    that read the Agent Skills format): checkpoint-resume, phase-checkpoint, step-runner."""


@skills_group.command("list", cls=command_class())
def list_command() -> None:
    """The shipped skills, one line each: name and what it is for."""
    from resumable import skills

    names = skills.names()
    width = max(len(n) for n in names)
    for name in names:
        first = skills.description(name).split(". ")[0].rstrip(".")
        click.echo(f"{name.ljust(width)}  {first}.")


@skills_group.command("show", cls=command_class())
@click.argument("name")
def show_command(name: str) -> None:
    """Print the SKILL.md of the skill NAME, as shipped."""
    from resumable import skills

    if name not in skills.names():
        raise InvalidInputError(f"no skill {name!r}; the skills are {', '.join(skills.names())}")
    sys.stdout.buffer.write(skills.text(name))
    sys.stdout.flush()


@skills_group.command("install", cls=command_class())
@click.option("--for", "agent", type=click.Choice(["claude", "codex"]), default="claude", show_default=True,
              help="The agent: Claude Code reads .claude/skills, Codex .agents/skills.")
@click.option("--project", "scope", flag_value="project", default=True,
              help="Into the project (the nearest directory with .git, else here). The default.")
@click.option("--user", "scope", flag_value="user",
              help="Into your home directory (~/.claude/skills, ~/.agents/skills).")
@click.option("--dir", "path", metavar="PATH", default=None, help="Into PATH (each skill as PATH/<name>/SKILL.md).")
@click.option("--force", is_flag=True, help="Overwrite a skill that was changed since resumable wrote it.")
def install_command(agent: str, scope: str, path: str | None, force: bool) -> None:
    """Copy the skills where the agent looks for them, and say what was written. An installed skill
    that someone changed is never overwritten without --force (refused, exit 2, nothing written);
    installing again what is there already writes nothing."""
    from resumable.skills import install

    if path is not None and scope == "user":
        raise UsageError("give --user or --dir, not both")
    dest = install.target_dir(agent, "dir" if path is not None else scope, path)
    done = install.install(dest, force=force, writer=f"resumable {__version__}")
    here = os.getcwd()
    for action in done:
        shown = os.path.relpath(action.path, here) if action.path.startswith(here + os.sep) else action.path
        click.echo(f"{action.what:<9} {shown}")
    wrote = sum(1 for a in done if a.writes)
    click.echo(f"{len(done)} skills in {dest}: " + (f"{wrote} written" if wrote else "nothing to write"))
