"""``resumable mcp``: serve the MCP server for coding agents over stdin and stdout.

The SDK (the ``mcp`` extra) is imported here only when the server starts, never for ``--help``; the
store is opened before it, so a bad ``--dir`` or ``--store`` is one line on stderr and exit 1 at
once, not a server that fails on its first call.
"""

from __future__ import annotations

import click

from resumable.cli.errors import command_class
from resumable.errors import UsageError

EXTRA = "resumable mcp needs the MCP SDK: pip install 'resumable-runs[mcp]'"


@click.command("mcp", cls=command_class(), short_help="Serve the MCP server for coding agents (stdio).")
@click.option("--dir", "runs_dir", metavar="DIR", default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")
@click.option("--allow-writes", is_flag=True,
              help="Also offer the tools that change runs: the checkpoint verbs, rerun, and starting"
                   " `resumable run` in the background.")
def mcp_command(runs_dir: str | None, store_url: str | None, allow_writes: bool) -> None:
    """Serve the Model Context Protocol over stdin/stdout, for a coding agent (Claude Code, Codex...):
    tools to list runs, summarise one (what failed, why, the command that resumes it), page its units
    and history, read a step's log and explain a job. Read-only unless --allow-writes. Job files are
    read below the directory it is started in; runs only from its one store.

    Claude Code: claude mcp add resumable -- resumable mcp --dir .resumable/runs
    """
    import os

    from resumable.mcp.bound import BoundStore

    # The store first: a bad --dir or --store is said at once, before the SDK's import (a second).
    bound = BoundStore(os.path.abspath(runs_dir) if runs_dir is not None else None, store_url,
                       allow_writes=allow_writes)
    try:
        import mcp.server.mcpserver  # noqa: F401  (the extra)
    except ImportError:
        bound.close()
        raise UsageError(EXTRA) from None
    from resumable.mcp.server import serve

    serve(bound)
