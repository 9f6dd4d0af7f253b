"""The resume recipe: launch classification (seed §1.6 shapes), shquote, and the resume set."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.core import plan, recipe
from status_fixtures import base_doc, unit

FILE = "/runs/run-a.json"


def doc_with(launch: Any = None, **kw: Any) -> dict[str, Any]:
    d = base_doc("run-a", units={"a": unit("done"), "b": unit("pending", dependsOn=["a"]),
                                 "c": unit("failed"), "d": unit("pending", dependsOn=["c"])}, **kw)
    if launch is not None:
        d["launch"] = launch
    return d


@pytest.mark.parametrize(
    ("token", "quoted"),
    [
        ("plain-token_1.2/x@y:z=w+v", "plain-token_1.2/x@y:z=w+v"),
        ("has space", "'has space'"),
        ("it's", "'it'\\''s'"),
        ("", "''"),
        ("$(rm -rf /)", "'$(rm -rf /)'"),
        ("a;b", "'a;b'"),
        ("naïve", "'naïve'"),
    ],
)
def test_shquote(token: str, quoted: str) -> None:
    assert recipe.shquote(token) == quoted


def test_resumable_launch_prints_exact_argv_with_cd_when_elsewhere() -> None:
    argv = ["resumable", "run", "job file.toml", "--id", "run-a", "--env", "X=it's"]
    desc = recipe.classify(doc_with({"kind": "resumable", "argv": argv, "cwd": "/srv/p"}), FILE,
                           here="/home/me")
    assert desc["runnable"] is True
    assert desc["kind"] == "resumable"
    assert desc["argv"] == argv
    assert desc["cwd"] == "/srv/p"
    assert desc["shell"] == ("cd /srv/p && resumable run 'job file.toml' --id run-a --env "
                             "'X=it'\\''s'")
    assert desc["resumeSet"] == {"skip": ["a"], "eligible": ["b", "c"], "dep_blocked": {"d": "c"}}


def test_resumable_launch_without_cd_when_already_there() -> None:
    desc = recipe.classify(
        doc_with({"kind": "resumable", "argv": ["resumable", "run", "j.toml"], "cwd": "/srv/p"}),
        FILE, here="/srv/p")
    assert desc["shell"] == "resumable run j.toml"


@pytest.mark.parametrize("argv", [None, [], "resumable run", [1, 2], ["ok", None]])
def test_resumable_launch_with_bad_argv_is_not_runnable(argv: Any) -> None:
    desc = recipe.classify(doc_with({"kind": "resumable", "argv": argv, "cwd": "/x"}), FILE)
    assert desc["runnable"] is False
    assert desc["kind"] == "no-launch"
    assert "shell" not in desc and "argv" not in desc


def test_codex_cli_shape_is_exactly_the_seeds_command() -> None:
    """What the seed's users run: `node pipeline.mjs resume --run <id>` (from the pipeline's
    directory), whatever the persisted scriptPath says."""
    launch = {"scriptPath": "tools/autonomous-pipeline/scripts/pipeline.mjs",
              "args": {"command": "resume", "run": "run-a"}}
    desc = recipe.classify(doc_with(launch), FILE)
    assert set(desc) == {"runnable", "kind", "run", "command", "argv", "shell", "resumeSet"}
    assert desc["runnable"] is True and desc["kind"] == "codex-cli"
    assert desc["command"] == "node"
    assert desc["argv"] == ["pipeline.mjs", "resume", "--run", "run-a"]
    assert desc["shell"] == "node pipeline.mjs resume --run run-a"


def test_codex_descriptor_for_another_run_is_not_runnable() -> None:
    launch = {"scriptPath": "pipeline.mjs", "args": {"command": "resume", "run": "run-other"}}
    desc = recipe.classify(doc_with(launch), FILE)
    assert desc["runnable"] is False and desc["kind"] == "no-launch"
    assert "run-other" in desc["reason"]


def test_codex_descriptor_with_unsafe_id_is_not_runnable() -> None:
    d = doc_with({"scriptPath": "pipeline.mjs", "args": {"command": "resume", "run": "my run"}})
    d["id"] = "my run"
    desc = recipe.classify(d, FILE)
    assert desc["runnable"] is False and desc["kind"] == "no-launch"


@pytest.mark.parametrize(
    "launch",
    [
        {"scriptPath": "pipeline-workflow.js", "args": {"x": 1}},
        {"scriptPath": "pipeline.mjs", "args": {"command": "start", "run": "run-a"}},
        {"scriptPath": "pipeline.mjs", "args": {"command": "resume", "run": "  "}},
        {"scriptPath": "anything.sh"},
    ],
)
def test_legacy_workflow_descriptor_is_passed_through_and_the_text_pins_status_file(
        launch: dict[str, Any]) -> None:
    desc = recipe.classify(doc_with(launch), FILE)
    assert set(desc) == {"runnable", "kind", "migrationOnly", "reason", "legacyLaunch",
                         "resumeSet"}
    assert desc["runnable"] is False and desc["kind"] == "legacy-workflow"
    assert desc["migrationOnly"] is True
    assert desc["legacyLaunch"] == launch  # --json: the descriptor unchanged, as the seed
    text = "\n".join(recipe.render_text(desc, doc_with(launch), FILE))
    assert f'"statusFile": "{FILE}"' in text  # the text shows it pinned, as the seed


def test_legacy_workflow_keeps_an_explicit_status_file() -> None:
    launch = {"scriptPath": "w.js", "args": {"statusFile": "/s.json"}}
    desc = recipe.classify(doc_with(launch), FILE)
    assert '"statusFile": "/s.json"' in "\n".join(recipe.render_text(desc, doc_with(launch), FILE))


@pytest.mark.parametrize(
    "launch",
    [None, [], ["pipeline.mjs"], "pipeline.mjs", 3, {}, {"scriptPath": ""},
     {"scriptPath": "   "}, {"scriptPath": 7}, {"scriptPath": "w.js", "args": [1]},
     {"kind": "resumable"}],
)
def test_no_launch_shape(launch: Any) -> None:
    d = doc_with()
    if launch is not None:
        d["launch"] = launch
    desc = recipe.classify(d, FILE)
    assert set(desc) == {"runnable", "kind", "migrationOnly", "reason", "resumeSet"}
    assert desc["runnable"] is False and desc["kind"] == "no-launch"
    assert desc["migrationOnly"] is True and desc["reason"]


def test_unreadable_shape() -> None:
    desc = recipe.unreadable(FILE, "cannot parse")
    assert desc == {"runnable": False, "kind": "unreadable", "migrationOnly": True,
                    "reason": "cannot parse", "file": str(FILE)}


def _command_lines(lines: list[str]) -> list[str]:
    """Lines a shell would execute: not comments, not the JSON block."""
    out = []
    in_json = False
    for line in lines:
        if line.startswith(("{", "[")):
            in_json = True
        if not in_json and not line.startswith("#"):
            out.append(line)
    return out


@pytest.mark.parametrize(
    "launch",
    [None, {"scriptPath": "w.js"}, {"kind": "resumable", "argv": []},
     {"scriptPath": "pipeline.mjs", "args": {"command": "resume", "run": "zzz"}}],
)
def test_text_never_prints_a_command_for_a_non_runnable_run(launch: Any) -> None:
    d = doc_with(launch)
    lines = recipe.render_text(recipe.classify(d, FILE), d)
    assert _command_lines(lines) == []
    assert any("skip 1 done · re-run 2 eligible · 1 dep-blocked" in x for x in lines)


def test_text_for_runnable_is_comment_command_set_line() -> None:
    d = doc_with({"kind": "resumable", "argv": ["resumable", "run", "j.toml"], "cwd": "/w"})
    lines = recipe.render_text(recipe.classify(d, FILE, here="/w"), d)
    assert _command_lines(lines) == ["resumable run j.toml"]
    assert lines[-1] == "# skip 1 done · re-run 2 eligible · 1 dep-blocked"


def test_text_for_unreadable() -> None:
    lines = recipe.render_text(recipe.unreadable(FILE, "bad json"))
    assert _command_lines(lines) == []
    assert "bad json" in lines[0]


def test_resume_set_is_null_safe() -> None:
    d = base_doc(units={"a": None, "b": "str", "c": unit("done"), "d": {"status": 3},
                        "e": {"dependsOn": "a"}, "f": unit("pending", dependsOn=["a", 5])})
    rs = recipe.resume_set(d)
    assert rs["skip"] == ["c"]
    assert rs["dep_blocked"] == {"f": "a"}
    assert recipe.resume_set({"units": None}) == {"skip": [], "eligible": [], "dep_blocked": {}}
    assert recipe.resume_set({}) == {"skip": [], "eligible": [], "dep_blocked": {}}


def test_resume_set_is_linear_on_a_long_chain() -> None:
    # The seed's per-unit walk is quadratic here: 100,000 chained pending units behind a failure.
    n = 100_000
    units = {f"u{i}": {"status": "pending", "dependsOn": [f"u{i - 1}"] if i else []}
             for i in range(n)}
    units["u0"]["status"] = "failed"
    # No timing assertion: a quadratic walk would not finish in the suite's lifetime at all.
    rs = recipe.resume_set({"units": units})
    assert len(rs["dep_blocked"]) == n - 1 and set(rs["dep_blocked"].values()) == {"u0"}


graphs = st.dictionaries(
    st.sampled_from([f"u{i}" for i in range(8)]),
    st.one_of(
        st.none(),
        st.fixed_dictionaries({
            "status": st.sampled_from(["done", "pending", "failed", "in_progress"]),
            "dependsOn": st.lists(st.sampled_from([f"u{i}" for i in range(10)]), max_size=3),
        }),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_resume_set_matches_the_seed_walk(units: dict[str, Any]) -> None:
    """The memoised O(N) walk gives the seed's answer (roots included, cycles too): the oracle
    below is the seed's per-unit walk, verbatim."""
    doc = {"units": units}

    def status(u: str) -> Any:
        v = units.get(u)
        return v.get("status") if isinstance(v, dict) else None

    def not_done(u: str) -> list[str]:
        v = units.get(u)
        deps = v.get("dependsOn", []) if isinstance(v, dict) else []
        return [d for d in deps if status(d) != "done"]

    want: dict[str, Any] = {"skip": [], "eligible": [], "dep_blocked": {}}
    for uid in units:
        if status(uid) == "done":
            want["skip"].append(uid)
            continue
        missing = not_done(uid)
        if not missing:
            want["eligible"].append(uid)
            continue
        root, seen = missing[0], set()
        while root not in seen:
            seen.add(root)
            nxt = not_done(root) if root in units else []
            if not nxt:
                break
            root = nxt[0]
        want["dep_blocked"][uid] = root
    full = plan.resume_set(doc)
    assert {k: full[k] for k in want} == want
    assert recipe.resume_set(doc) == want


def test_the_view_s_resume_set_leaves_removed_units_out() -> None:
    from resumable.core.plan import resume_set as seed_resume_set
    from resumable.core.recipe import resume_set

    doc = {"units": {"a": {"status": "done"}, "b": {"status": "pending", "removed": True},
                     "c": {"status": "pending", "dependsOn": ["b"]}}}
    assert resume_set(doc) == {"skip": ["a"], "eligible": [], "dep_blocked": {"c": "b"}}
    assert seed_resume_set(doc, diagnostics=False)["eligible"] == ["b"]  # the seed's verb: every unit
