"""The live workflow overlay: the seed's strict reader of Claude Code workflow journals."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from corehelpers import needs
from resumable.view import workflow as wo
from resumable.view.workflow import (
    NO_OVERLAY_HINT,
    WorkflowStatus,
    divergence,
    js_relative_time,
    overlay_json,
    overlay_lines,
    parse_journal,
    project_root_for_runs_dir,
    project_slug,
    read_workflow_status,
    resolve_claude_dir,
)

T0 = 1_780_000_000  # seconds; every fixture journal gets an explicit mtime


def started(agent: str, key: str = "k") -> str:
    return json.dumps({"type": "started", "key": key, "agentId": agent}) + "\n"


def result(agent: str, key: str = "k", value: Any = "ok") -> str:
    return json.dumps({"type": "result", "key": key, "agentId": agent, "result": value}) + "\n"


class Claude:
    """A fixture Claude config dir with the project directory of ``cwd``."""

    def __init__(self, root: Path, cwd: Path) -> None:
        self.root = root
        self.cwd = cwd
        self.project = root / "projects" / project_slug(cwd)

    def journal(self, session: str, wf: str, text: str, mtime: float = T0) -> Path:
        d = self.project / session / "subagents" / "workflows" / wf
        d.mkdir(parents=True, exist_ok=True)
        f = d / "journal.jsonl"
        f.write_text(text, encoding="utf-8")
        os.utime(f, ns=(int(mtime * 1e9), int(mtime * 1e9)))
        return f

    def read(self, now: float = T0 + 60, **kw: Any) -> WorkflowStatus | None:
        return read_workflow_status(self.cwd, now=now, **kw)


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Claude:
    root = tmp_path / "claude-config"
    cwd = tmp_path / "proj"
    cwd.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(root))
    return Claude(root, cwd)


# ---- locating --------------------------------------------------------------------------------------

def test_claude_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/cfg")
    assert resolve_claude_dir("/explicit") == "/explicit"
    assert resolve_claude_dir() == "/cfg"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "")  # empty counts as unset, as the seed's ||
    monkeypatch.setenv("HOME", str(tmp_path / "h1"))
    assert resolve_claude_dir() == str(tmp_path / "h1" / ".claude")
    monkeypatch.setenv("HOME", str(tmp_path / "h2"))  # read at call time, not at import
    assert resolve_claude_dir() == str(tmp_path / "h2" / ".claude")


def test_project_slug() -> None:
    assert project_slug("/home/me/my proj.v2/") == "-home-me-my-proj-v2"
    assert project_slug("/a/b/../c_d") == "-a-c-d"
    assert project_slug("/x/é😀") == "-x----"  # one dash per UTF-16 code unit


def test_project_root_for_runs_dir(tmp_path: Path) -> None:
    assert project_root_for_runs_dir(tmp_path / ".ulpi" / "runs") == str(tmp_path)
    assert project_root_for_runs_dir(tmp_path / ".resumable" / "runs") == str(tmp_path)
    assert project_root_for_runs_dir(tmp_path / "elsewhere", cwd="/here") == "/here"


def test_a_symlinked_config_dir_is_the_users_choice(claude: Claude, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Symlinks are refused only below the project directory (what Claude Code writes).
    claude.journal("s", "wf_x", started("a"))
    link = tmp_path / "dotfiles-link"
    link.symlink_to(claude.root)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(link))
    got = claude.read()
    assert got is not None and got.wf == "wf_x"


def test_relative_cwd_resolves_against_the_process_cwd(claude: Claude, monkeypatch: pytest.MonkeyPatch) -> None:
    claude.journal("s", "wf_x", started("a"))
    monkeypatch.chdir(claude.cwd.parent)
    got = read_workflow_status(claude.cwd.name, now=T0)
    assert got is not None and got.wf == "wf_x"


def test_explicit_claude_dir_wins_over_env(claude: Claude, tmp_path: Path) -> None:
    other = Claude(tmp_path / "other", claude.cwd)
    other.journal("s", "wf_x", started("a"))
    assert claude.read() is None
    got = claude.read(claude_dir=other.root)
    assert got is not None and got.wf == "wf_x"


# ---- choosing the journal --------------------------------------------------------------------------

def test_no_project_or_no_journal_is_none(claude: Claude) -> None:
    assert claude.read() is None
    (claude.project / "s" / "subagents" / "workflows" / "wf_a").mkdir(parents=True)
    assert claude.read() is None


def test_newest_by_mtime_wins(claude: Claude) -> None:
    claude.journal("s1", "wf_old", started("a"), mtime=T0 - 100)
    claude.journal("s2", "wf_new", started("b") + started("c"), mtime=T0)
    claude.journal("s3", "wf_older", started("d"), mtime=T0 - 200)
    got = claude.read()
    assert got is not None and got.wf == "wf_new" and got.spawned == 2


def test_tie_broken_by_path_descending(claude: Claude) -> None:
    claude.journal("s1", "wf_a", started("a"))
    claude.journal("s2", "wf_a", started("b"))
    got = claude.read()
    assert got is not None and got.journal.endswith("s2/subagents/workflows/wf_a/journal.jsonl")


def test_tie_uses_locale_order_like_the_seed(claude: Claude) -> None:
    # localeCompare: wf_a < wf_B (case-insensitive first); plain code points would say the reverse.
    claude.journal("s", "wf_a", started("a"))
    claude.journal("s", "wf_B", started("b"))
    got = claude.read()
    assert got is not None and got.wf == "wf_B"


@needs("node", "the JavaScript comparisons run the real localeCompare")
def test_locale_key_matches_node_localecompare() -> None:
    import random

    rnd = random.Random(3)
    chars = "aAbBzZ09_-./ "
    names = sorted({"".join(rnd.choice(chars) for _ in range(rnd.randint(1, 6))) for _ in range(300)})
    js = "const a=JSON.parse(require('fs').readFileSync(0,'utf8'));a.sort((x,y)=>x.localeCompare(y));" \
         "console.log(JSON.stringify(a))"
    theirs = json.loads(subprocess.run(["node", "-e", js], input=json.dumps(names).encode(),
                                       capture_output=True, check=True).stdout)
    assert sorted(names, key=wo.locale_key) == theirs


def test_names_outside_the_pattern_are_ignored(claude: Claude) -> None:
    claude.journal("s", "wf_ok", started("a"), mtime=T0 - 10)
    claude.journal("s", "wf_bad.name", started("b"))
    claude.journal("s", "other", started("c"))
    got = claude.read()
    assert got is not None and got.wf == "wf_ok"


def test_malformed_newest_gives_none_never_an_older_journal(claude: Claude) -> None:
    claude.journal("s", "wf_good", started("a"), mtime=T0 - 100)
    claude.journal("s", "wf_bad", started("b") + "not json\n" + started("c"))
    assert claude.read() is None


def test_symlinks_are_never_followed(claude: Claude, tmp_path: Path) -> None:
    real = claude.journal("s", "wf_real", started("a"), mtime=T0 - 100)
    outside = tmp_path / "planted.jsonl"
    outside.write_text(started("evil"))
    os.utime(outside, (T0, T0))
    d = claude.project / "s" / "subagents" / "workflows" / "wf_link"
    d.mkdir()
    (d / "journal.jsonl").symlink_to(outside)
    (claude.project / "s" / "subagents" / "workflows" / "wf_dirlink").symlink_to(real.parent)
    other = tmp_path / "elsewhere-session"
    (other / "subagents" / "workflows" / "wf_zzz").mkdir(parents=True)
    (other / "subagents" / "workflows" / "wf_zzz" / "journal.jsonl").write_text(started("evil2"))
    (claude.project / "zz-session-link").symlink_to(other)
    got = claude.read()
    assert got is not None and got.wf == "wf_real" and got.running == ("a",)


def test_fifo_journal_and_agent_transcripts_are_never_opened(claude: Claude, monkeypatch: pytest.MonkeyPatch) -> None:
    good = claude.journal("s", "wf_a", started("a") + started("b") + result("a"), mtime=T0 - 5)
    os.mkfifo(good.parent / "agent-a.jsonl")
    (good.parent / "agent-b.jsonl").write_text("{broken")
    fifo_dir = claude.project / "s" / "subagents" / "workflows" / "wf_fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "journal.jsonl")  # newer, but not a regular file: not a candidate
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail(f"open{a}"))
    got = claude.read()
    assert got is not None and got.wf == "wf_a" and got.running == ("b",)
    assert opened == [str(good)]


def test_any_exception_gives_none(claude: Claude, monkeypatch: pytest.MonkeyPatch) -> None:
    claude.journal("s", "wf_a", started("a"))

    def boom(*_: Any) -> Any:
        raise PermissionError(13, "denied")

    monkeypatch.setattr(os, "scandir", boom)
    assert claude.read() is None


# ---- strict parsing ---------------------------------------------------------------------------------

def test_counts_and_running_in_order(claude: Claude) -> None:
    text = started("a1", "u1") + started("a2", "u2") + started("a1", "u1") + result("a1", "u1") \
        + started("a3", "u3") + result("a9", "u9", {"x": [1]})
    claude.journal("s", "wf_x", text, mtime=T0)
    got = claude.read(now=T0 + 10)
    assert got is not None
    assert (got.wf, got.spawned, got.done, got.running) == ("wf_x", 4, 2, ("a2", "a3"))
    assert got.running_keys == ("u2", "u3")
    assert got.mtime == "2026-05-28T20:26:40.000Z"
    assert got.to_json() == {"wf": "wf_x", "spawned": 4, "done": 2, "running": ["a2", "a3"],
                             "mtime": "2026-05-28T20:26:40.000Z", "stale": False}


def test_mtime_iso_keeps_milliseconds(claude: Claude) -> None:
    f = claude.journal("s", "wf_x", started("a"))
    os.utime(f, ns=(0, T0 * 10**9 + 123_400_000))
    got = claude.read()
    assert got is not None and got.mtime.endswith(":40.123Z")  # truncated, as Date does
    os.utime(f, ns=(0, T0 * 10**9 + 123_999_999))
    got = claude.read()
    # Node's mtimeMs is sec*1e3 + nsec/1e6 in doubles, which rounds this one up to ...124.0.
    assert got is not None and got.mtime.endswith(":40.124Z")


def test_torn_final_line_is_dropped(claude: Claude) -> None:
    claude.journal("s", "wf_x", started("a") + started("b") + '{"type":"result","key":"k","agen')
    got = claude.read()
    assert got is not None and (got.spawned, got.done, got.running) == (2, 0, ("a", "b"))


def test_final_line_without_newline_that_parses_is_kept(claude: Claude) -> None:
    claude.journal("s", "wf_x", started("a") + result("a").rstrip("\n"))
    got = claude.read()
    assert got is not None and (got.spawned, got.done, got.running) == (1, 1, ())


@pytest.mark.parametrize("tail", [
    '{"type":"started","key":"k"}',           # parses, but is not a valid entry
    "17",                                      # a torn line that happens to parse
])
def test_final_line_that_parses_but_is_invalid_gives_none(claude: Claude, tail: str) -> None:
    claude.journal("s", "wf_x", started("a") + tail)
    assert claude.read() is None


def test_only_a_torn_line_gives_none(claude: Claude) -> None:
    claude.journal("s", "wf_x", '{"type":"sta')
    assert claude.read() is None


@pytest.mark.parametrize("bad", [
    "\n",                                                                          # empty line
    '{"type":"started","key":"k","agentId":"a","extra":1}\n',                      # extra key
    '{"type":"result","key":"k","agentId":"a"}\n',                                 # missing result
    '{"type":"progress","key":"k","agentId":"a"}\n',                               # other type
    '{"type":"started","key":"","agentId":"a"}\n',                                 # empty key
    '{"type":"started","key":"k","agentId":7}\n',                                  # non-string id
    '{"type":"started","key":"k","agentId":NaN}\n',                                # not JSON to JavaScript
    '["started","k","a"]\n',                                                       # not an object
    '{"type":"started","key":"k","agentId":"a"\n',                                 # torn but complete
])
def test_any_bad_complete_line_gives_none(claude: Claude, bad: str) -> None:
    claude.journal("s", "wf_x", started("a") + bad + started("b"))
    assert claude.read() is None
    claude.journal("s", "wf_x", started("a") + bad)  # also as the last, newline-terminated line
    assert claude.read() is None


def test_empty_journal_gives_none(claude: Claude) -> None:
    claude.journal("s", "wf_x", "")
    assert claude.read() is None
    assert parse_journal("") is None


def test_duplicate_keys_collapse_as_in_javascript() -> None:
    assert parse_journal('{"type":"started","key":"k","agentId":"a","key":"j"}\n') == [
        {"type": "started", "key": "j", "agentId": "a"}]


# ---- staleness -------------------------------------------------------------------------------------

def test_stale_after_thirty_minutes_with_an_injected_clock(claude: Claude) -> None:
    claude.journal("s", "wf_x", started("a"), mtime=T0)
    fresh, edge, old = (claude.read(now=T0 + d) for d in (1799, 1800, 1801))
    assert fresh is not None and not fresh.stale
    assert edge is not None and not edge.stale  # strictly greater than
    assert old is not None and old.stale
    custom = claude.read(now=T0 + 11, stale_after=10)
    assert custom is not None and custom.stale


@pytest.mark.parametrize(("now", "after"), [(float("inf"), None), (float("nan"), None), (T0, float("nan")),
                                            (T0, float("inf"))])
def test_non_finite_clock_or_limit_is_stale(claude: Claude, now: float, after: float | None) -> None:
    claude.journal("s", "wf_x", started("a"), mtime=T0)
    got = claude.read(now=now, stale_after=after)
    assert got is not None and got.stale


# ---- rendering --------------------------------------------------------------------------------------

def plain(lines: list[list[tuple[str, str]]]) -> list[str]:
    return ["".join(t for t, _ in line) for line in lines]


def status(**kw: Any) -> WorkflowStatus:
    base: dict[str, Any] = dict(wf="wf_x", spawned=3, done=1, running=("ag-2", "ag-3"), mtime="…",
                                stale=False, mtime_seconds=T0 - 125, journal="/j", running_keys=("b", "c"),
                                started_keys=frozenset({"a", "b", "c"}))
    base.update(kw)
    return WorkflowStatus(**base)


DOC = {"units": {"a": {"status": "done"}, "b": {"status": "in_progress"}, "c": {"status": "pending"},
                 "d": {"status": "in_progress"}, "e": None}}


def test_no_overlay_prints_the_seed_hint() -> None:
    assert plain(overlay_lines(None, DOC, T0)) == [f"Live workflow  {NO_OVERLAY_HINT}"]
    assert "no live workflow transcript found — use /workflows" in NO_OVERLAY_HINT
    assert overlay_json(None, DOC) is None


def test_overlay_lines_in_the_seed_words() -> None:
    lines = plain(overlay_lines(status(), DOC, T0))
    assert lines[0] == "Live workflow  wf_x · 1 done · 2 running (ag-2, ag-3) · updated 2m ago"
    assert lines[1].startswith("divergence     live agents 3 vs durable units 1/5")
    assert "2 more agent start(s) than durable done unit(s)" in lines[1]
    stale = plain(overlay_lines(status(stale=True, mtime_seconds=T0 - 3 * 3600 - 600), DOC, T0))
    assert stale[0].endswith(" · stale (3h 10m ago)")


def test_running_list_is_capped_at_six() -> None:
    ids = tuple(f"a{i}" for i in range(8))
    line = plain(overlay_lines(status(running=ids, running_keys=ids), DOC, T0))[0]
    assert "(a0, a1, a2, a3, a4, a5, …)" in line and "8 running" in line


def test_divergence_rules() -> None:
    # b and c are running; d is in_progress with no agent; a done, none running on it.
    assert divergence(status(), DOC) == [
        "2 more agent start(s) than durable done unit(s)",
        "in_progress unit(s) with no running agent: d",
    ]
    rerun = status(spawned=1, running=("ag-9",), running_keys=("a",))
    assert "agent running for done unit(s): a" in divergence(rerun, DOC)
    agree = status(spawned=1, running=("x", "y"), running_keys=("b", "d"))
    assert divergence(agree, DOC) == []
    unrelated = status(spawned=1, running=("x",), running_keys=("step-7",), started_keys=frozenset({"step-7"}))
    assert divergence(unrelated, DOC) == []  # keys name no unit: nothing to compare


def test_overlay_json_is_the_seed_object_plus_divergence() -> None:
    got = overlay_json(status(), DOC)
    assert got is not None
    assert list(got) == ["wf", "spawned", "done", "running", "mtime", "stale", "divergence"]
    assert got["running"] == ["ag-2", "ag-3"] and len(got["divergence"]) == 2


def test_control_characters_from_the_journal_are_escaped() -> None:
    evil = status(running=("\x1b[31mred", "ok\nnext"), running_keys=("\x1b", "z"))
    text = "\n".join(plain(overlay_lines(evil, DOC, T0)))
    assert "\x1b" not in text and "\\x1b[31mred" in text and "ok\\x0anext" in text


@pytest.mark.parametrize(("secs", "text"), [(0, "0s ago"), (59.4, "59s ago"), (59.6, "1m ago"), (89, "1m ago"),
                                            (90, "2m ago"), (3569, "59m ago"), (3570, "1h 0m ago"),
                                            (47 * 3600 + 59 * 60, "47h 59m ago"), (48 * 3600, "2d ago"),
                                            (-5, "0s ago")])
def test_seed_relative_time(secs: float, text: str) -> None:
    assert js_relative_time(T0 - secs, T0) == text
