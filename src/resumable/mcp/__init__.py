"""``resumable mcp``: the MCP server that lets coding agents ask about runs, and (opt-in) write them.

It stands beside the CLI and calls the API as the CLI does; only ``server`` imports the MCP SDK (the
``mcp`` extra), so the rest of the package is plain Python that tests can call directly.

::

    server.py    the MCPServer: tools, resources and prompts; errors become tool errors
    bound.py     the one store the server was started on, and the checks every argument passes
    answers.py   compact JSON, size caps and cursors: every answer is bounded
    runs.py      read tools about runs: the list, one run's summary, the resume set
    pages.py     read tools that page through a run: its units, its history
    logs.py      the tail of a step's log, read only inside the store
    explain.py   what `resumable run` would do with a job file, and why
    writes.py    the checkpoint verbs and rerun (only with --allow-writes)
    starter.py   starting `resumable run` in the background (only with --allow-writes)
    prompts.py   "resume this run" and "why did this fail"
"""
