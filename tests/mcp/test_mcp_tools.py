"""`resumable mcp` spoken to with the SDK's own stdio client, against a runs directory and against
PostgreSQL: every tool, resource and prompt, the answer an agent needs in at most two calls, writes
only with --allow-writes, and refusals as tool errors with the CLI's own message."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from mcphelpers import RESUMABLE, Store, failed_job, run_async, served

READ_TOOLS = {"list_runs", "run_summary", "resume_set", "list_units", "history", "tail_log", "explain", "watch_run"}
WRITE_TOOLS = {"init", "unit", "phase", "item", "resolve", "validation", "finalize", "rerun", "run_job"}


def test_what_failed_and_how_to_resume_takes_one_call(store: Store) -> None:
    """The summary says which step failed, why (its exit code and the last lines of its log) and the
    command that resumes the run; that command, run as it is, skips what is done and finishes."""
    failed_job(store)

    async def go() -> None:
        async with served(store) as s:
            summary = await s.ok("run_summary")
            assert s.calls == 1
            assert summary["id"] == "nightly" and summary["status"] == "needs_attention"
            assert summary["by_state"] == {"done": 1, "failed": 1, "pending": 1}
            (build,) = summary["failed"]
            assert build["unit"] == "build" and build["exitCode"] == 1
            assert "error: missing totals.txt" in build["logTail"]
            resume = summary["resume"]
            assert resume["runnable"] is True
            assert resume["skip"] == 1 and resume["eligible"] == 1 and resume["dep_blocked"] == 1
            command = resume["command"]
            assert store.option[1] in command  # names the store: it pastes anywhere
            (store.project / "totals.txt").write_text("0\n")
            # Run from elsewhere, as an agent might: the command carries its directory and store.
            proc = subprocess.run(["bash", "-c", command.replace("resumable ", f"{shlex.quote(RESUMABLE)} ", 1)],
                                  cwd="/", env=store.env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
            assert "start  fetch" not in proc.stdout and "start  build" in proc.stdout
            after = await s.ok("run_summary", run="nightly")
            assert after["status"] == "done" and after["failed"] == []
            assert after["resume"]["skip"] == 3

    run_async(go)


def test_every_read_tool_answers(store: Store) -> None:
    failed_job(store)

    async def go() -> None:
        async with served(store) as s:
            assert set(await s.tools()) == READ_TOOLS
            runs = await s.ok("list_runs")
            assert [r["id"] for r in runs["runs"]] == ["nightly"] and runs["runs"][0]["done"] == 1
            rs = await s.ok("resume_set", run="nightly")
            assert rs["skip"] == 1 and rs["units"] == [{"unit": "build"}, {"unit": "publish", "waits_on": "build"}]
            units = await s.ok("list_units", run="nightly")
            assert [(u["id"], u["status"]) for u in units["units"]] == [
                ("fetch", "done"), ("build", "failed"), ("publish", "pending")]
            failed = await s.ok("list_units", run="nightly", state="failed", detail=True)
            assert [u["id"] for u in failed["units"]] == ["build"] and failed["units"][0]["dependsOn"] == ["fetch"]
            assert failed["matching"] == 1 and "next_cursor" not in failed
            history = await s.ok("history", run="nightly", limit=2)
            assert [e["seq"] for e in history["events"]] == [1, 2] and history["next_since"] == 2
            rest = await s.ok("history", run="nightly", since=history["next_since"], limit=1000)
            assert rest["events"][0]["seq"] == 3 and "next_since" not in rest
            assert any(e["what"].startswith("unit build -> failed") for e in rest["events"])
            log = await s.ok("tail_log", run="nightly", step="build")
            assert "error: missing totals.txt" in log["text"] and log["attempt"] == 1
            plan = await s.ok("explain")
            assert [(d["step"], d["run"]) for d in plan["steps"]] == [("fetch", False), ("build", True),
                                                                      ("publish", True)]
            assert plan["steps"][1]["reason"] == "failed last time (exit code 1)"
            one = await s.ok("explain", step="publish")
            assert one["steps"] == [{"step": "publish", "run": True, "reason": "never ran"}]
            watched = await s.ok("watch_run", run="nightly", timeout=5)
            assert watched["changed"] is False and watched["id"] == "nightly"  # nothing works on it: at once

    run_async(go)


def test_resources_and_prompts(store: Store) -> None:
    failed_job(store)

    async def go() -> None:
        async with served(store) as s:
            c = s.client
            listed = await c.read_resource("resumable://runs")
            assert json.loads(listed.contents[0].text)["runs"][0]["id"] == "nightly"
            doc = json.loads((await c.read_resource("resumable://runs/nightly")).contents[0].text)
            assert doc["id"] == "nightly" and set(doc["units"]) == {"fetch", "build", "publish"}
            log = json.loads((await c.read_resource("resumable://runs/nightly/logs/build")).contents[0].text)
            assert "missing totals.txt" in log["text"]
            prompts = {p.name for p in (await c.list_prompts()).prompts}
            assert prompts == {"resume_run", "why_failed"}
            why = (await c.get_prompt("why_failed", {"run": "nightly"})).messages[0].content.text
            assert "error: missing totals.txt" in why and "tail_log" in why
            resume = (await c.get_prompt("resume_run", {"run": "nightly"})).messages[0].content.text
            assert summary_command(resume) in resume and "never mark a unit done" in resume.lower()

    run_async(go)


def summary_command(prompt: str) -> str:
    """The resume command the prompt's embedded summary carries."""
    start = prompt.index("{")
    summary = json.JSONDecoder().raw_decode(prompt[start:])[0]
    command: str = summary["resume"]["command"]
    assert command.startswith("cd ") and "resumable run" in command
    return command


def test_writes_are_refused_without_allow_writes(store: Store) -> None:
    store.cli("init", "r1", "--task", "t", "--units", "a,b")
    before = store.cli("get", "r1").stdout

    async def go() -> None:
        async with served(store) as s:
            assert not WRITE_TOOLS & set(await s.tools())
            for tool, args in (("unit", {"run": "r1", "unit": "a", "state": "done"}),
                               ("finalize", {"run": "r1", "status": "aborted"}),
                               ("init", {"task": "x", "run": "r2"}),
                               ("run_job", {})):
                got = await s.call(tool, **args)
                assert got.error and tool in got.text, got

    run_async(go)
    assert store.cli("get", "r1").stdout == before
    assert store.cli("get", "r2", check=False).returncode == 3


def test_the_checkpoint_verbs_with_allow_writes(store: Store) -> None:
    async def go() -> None:
        async with served(store, "--allow-writes") as s:
            assert set(await s.tools()) == READ_TOOLS | WRITE_TOOLS
            made = await s.ok("init", task="migrate", run="m", units=["a", "b"], required_phases=["check"])
            assert made["id"] == "m"
            again = await s.call("init", task="again", run="m")
            assert again.error and "refused (exit 2)" in again.text and "LIVE checkpoint" in again.text
            await s.ok("unit", run="m", unit="a", state="done", note="ok")
            demote = await s.call("unit", run="m", unit="a", state="pending")
            assert demote.error and "refused (exit 2): unit 'a' is already done" in demote.text
            await s.ok("unit", run="m", unit="c", state="pending", deps=["b"])
            await s.ok("phase", run="m", phase="check", state="running")
            ids = (await s.ok("item", run="m", items={"kind": "blocker", "text": "disk full"}))["ids"]
            refused = await s.call("finalize", run="m", status="done")
            assert refused.error
            cli = store.cli("finalize", "m", "done", check=False)
            assert cli.returncode == 2
            message = cli.stderr.strip().removeprefix("resumable: ")
            assert refused.text == f"refused (exit 2): {message}"  # the CLI's exit-2 message, word for word
            assert (await s.ok("resolve", run="m", ids=ids))["resolved"] == ids
            await s.ok("validation", run="m", status="green", note="all good")
            rerun = await s.ok("rerun", run="m", units=["a", "c"], reason="bad rows")
            assert rerun["will_run_again"] == ["a"] and rerun["already_pending"] == ["c"]
            await s.ok("finalize", run="m", status="needs_attention", result="b is left")

    run_async(go)
    doc = json.loads(store.cli("get", "m").stdout)
    assert doc["status"] == "needs_attention" and doc["units"]["a"]["status"] == "pending"
    assert doc["units"]["a"]["invalidations"][-1]["reason"] == "bad rows"
    assert doc["phases"]["check"]["status"] == "running" and doc["finalValidation"]["status"] == "green"
    assert doc["openItems"] == [] and len(doc["resolvedItems"]) == 1


def test_run_job_starts_the_runner_in_the_background(store: Store, tmp_path: Path) -> None:
    """The tool returns with the run's id while the job's step is still running (it waits for a file
    the test creates only afterwards); the run then finishes on its own."""
    gate = tmp_path / "gate"
    (store.project / "resumable.toml").write_text(
        '[job]\nname = "bg"\n\n[steps.wait]\n'
        f'run = "while [ ! -e {gate} ]; do sleep 0.05; done; echo through"\n\n'
        '[steps.after]\nrun = "echo after"\nneeds = ["wait"]\n')

    async def go() -> None:
        async with served(store, "--allow-writes") as s:
            started = await s.ok("run_job")
            assert started["id"] == "bg" and started["runner"]["running"] is True
            # Refused while that runner lives: two runners never work on one run.
            twice = await s.call("run_job")
            assert twice.error and "refused (exit 2)" in twice.text
            # The step cannot end before the gate exists: the tool answered while it ran (or before).
            gate.write_text("go")
            summary = await s.ok("watch_run", run="bg", timeout=60)
            while summary["status"] != "done" or summary["started_here"]["running"]:
                assert summary["started_here"]["running"], summary  # a runner that died would end the wait
                summary = await s.ok("watch_run", run="bg", timeout=60)
            assert summary["by_state"] == {"done": 2} and summary["started_here"]["exitCode"] == 0
            output = await s.ok("tail_log", run="bg")
            assert "bg: done" in output["text"]
            step_log = await s.ok("tail_log", run="bg", step="wait")
            assert step_log["text"] == "through\n"

    run_async(go)
    assert store.cli("status", "bg").returncode == 0


def test_explain_and_run_job_read_only_job_files_below_the_server(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text('[job]\nname = "x"\n[steps.a]\nrun = "touch pwned"\n')
    (store.project / "link.toml").symlink_to(outside)
    (store.project / "sub").mkdir()

    async def go() -> None:
        async with served(store, "--allow-writes") as s:
            for jobfile in (str(outside), "../outside.toml", "sub/../../outside.toml", "link.toml", "~/x.toml",
                            "resumable.py", "missing.toml", "sub"):
                for tool in ("explain", "run_job"):
                    got = await s.call(tool, jobfile=jobfile)
                    assert got.error and "error (exit 1)" in got.text, (tool, jobfile, got)

    run_async(go)
    assert not (tmp_path / "pwned").exists() and not (store.project / "pwned").exists()


def test_a_workers_log_comes_from_the_database_when_the_file_is_gone(store: Store) -> None:
    """On PostgreSQL a step's log is kept with its attempt: read from there when this host has no file
    (a worker on another host ran it). In a runs directory the file is the only copy: said so."""
    failed_job(store)
    logs = [p for p in store.project.parent.rglob("build.1.log")]
    assert len(logs) == 1, logs
    logs[0].unlink()

    async def go() -> None:
        async with served(store) as s:
            log = await s.ok("tail_log", run="nightly", step="build")
            if store.kind == "postgres":
                assert "error: missing totals.txt" in log["text"]
            else:
                assert "gone" in log["note"] and "text" not in log

    run_async(go)
