"""MkDocs hook: the CLI reference's low-level verbs, written from the table their ``--help`` is
printed from (``resumable.cli.main.VERB_HELP``), so the page cannot drift from the command.

The verbs parse their own arguments (click's import costs more than a whole call), so they are not
click commands that mkdocs-click could document; every other command is (reference/cli.md).
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- low-level-verbs -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def low_level_verbs_markdown() -> str:
    from resumable.cli.main import VERB_HELP, _verb_help_parts
    from resumable.cli.startup import LOW_LEVEL_VERBS

    out: list[str] = []
    for name in LOW_LEVEL_VERBS:
        usage, what, sections = _verb_help_parts(name)
        out += [f"### resumable {name}", "", what, "", "**Usage:**", "", "```text",
                f"resumable {name} {usage}", "```", ""]
        for title, rows in sections:
            if not rows:
                continue
            out += [f"**{title}:**", "", "| | |", "|---|---|"]
            out += [f"| `{_cell(term)}` | {_cell(text)} |" for term, text in rows]
            out.append("")
    assert set(VERB_HELP) == set(LOW_LEVEL_VERBS)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, low_level_verbs_markdown())
    return markdown
