"""`resumable run --stream`: each step's output lines as they come, prefixed with its id, whole
lines only however parallel steps interleave, control characters escaped, logs unchanged."""

from __future__ import annotations

import re
from pathlib import Path

from runnerhelpers import spawn_cli, units, write

from resumable.runner.liveout import LogFollower

LINES = 1000


def test_two_parallel_steps_of_a_thousand_lines_each_never_tear_a_line(work: Path) -> None:
    # Each line written in three pieces, so a reader that printed whatever bytes it found would
    # cut lines in the middle.
    step = 'for i in $(seq {n}); do printf "{id} line "; printf "%s" "$i"; printf " end\\n"; done'
    write(work / "resumable.toml", f"""
[job]
name = "s"
[steps.alpha]
run = '{step.format(n=LINES, id="alpha")}'
[steps.b]
run = '{step.format(n=LINES, id="b")}'
""")
    p = spawn_cli(["--stream", "-j", "2"], work)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    shown = [ln for ln in out.splitlines() if " | " in ln]
    assert len(shown) == 2 * LINES
    pattern = re.compile(r"^(alpha|b    ) \| (alpha|b) line (\d+) end$")
    seen: dict[str, list[int]] = {"alpha": [], "b": []}
    for line in shown:
        m = pattern.match(line)
        assert m, line
        assert m.group(1).strip() == m.group(2)  # a line is its own step's, whole
        seen[m.group(2)].append(int(m.group(3)))
    assert seen == {"alpha": list(range(1, LINES + 1)), "b": list(range(1, LINES + 1))}
    # The log files hold exactly what the steps wrote.
    for sid in ("alpha", "b"):
        log = Path(units(work, "s")[sid]["attempts"][-1]["log"])
        assert log.read_text().splitlines() == [f"{sid} line {i} end" for i in range(1, LINES + 1)]


def test_control_characters_never_reach_the_terminal_and_a_last_line_without_newline_shows(work: Path) -> None:
    write(work / "resumable.toml", """
[job]
name = "c"
[steps.evil]
run = "printf 'clear\\\\033[2J here\\\\n\\\\007bell'"
""")
    p = spawn_cli(["-v"], work)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "evil | clear\\x1b[2J here" in out.splitlines()
    assert "evil | \\x07bell" in out.splitlines()


def test_without_stream_no_output_lines(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "q"\n[steps.a]\nrun = "echo hidden"\n')
    p = spawn_cli([], work)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0 and "hidden" not in out


def test_the_follower_keeps_a_partial_line_until_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"one\ntw")
    got: list[str] = []
    f = LogFollower(got.extend, width=3)
    f.follow("x", str(log))
    f.poll()
    assert got == ["x   | one"]
    with open(log, "ab") as fh:
        fh.write(b"o\nthree")
    f.poll()
    assert got == ["x   | one", "x   | two"]
    f.finish("x")
    assert got == ["x   | one", "x   | two", "x   | three"]
    f.poll()
    assert len(got) == 3
