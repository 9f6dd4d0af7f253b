"""Quick tier of the reliability goals (R1-R6, R9): the same checks as the full tier
(``python -m benchmarks.proof --tier full``), with fewer trials, so every CI run exercises them.
No assertion here depends on timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import goals

R2_SHARDS = 3


def check(result: goals.Result) -> None:
    assert result.ok, f"{result.goal}: {result.figure}\n" + "\n".join(result.failures)


def test_r1_sigkill_at_random_points(tmp_path: Path) -> None:
    check(goals.r1_sigkill(tmp_path, trials=60))


@pytest.mark.parametrize("shard", range(R2_SHARDS))
def test_r2_crash_at_every_io_call(tmp_path: Path, shard: int) -> None:
    # In shards: the suite's longest test otherwise, it kept one worker busy long after the rest.
    check(goals.r2_crash_every_call(tmp_path, shard=shard, shards=R2_SHARDS))


def test_r3_torn_tail_and_flipped_bytes(tmp_path: Path) -> None:
    check(goals.r3_torn_and_flipped(tmp_path, flip_records=1))


def test_r4_power_loss(tmp_path: Path) -> None:
    check(goals.r4_power_loss(tmp_path, trials=150))


def test_r5_enospc_and_eio_at_every_call(tmp_path: Path) -> None:
    check(goals.r5_enospc_eio(tmp_path, commands=("unit",)))


def test_r6_concurrent_writers_and_negative_control(tmp_path: Path) -> None:
    check(goals.r6_with_control(tmp_path, writers=4, each=100, control_each=100))


def test_r9_malformed_inputs(tmp_path: Path) -> None:
    check(goals.r9_malformed(tmp_path, n=1500, subprocess_sample=5))


def test_r9_wrong_typed_documents_are_refused_by_writes(tmp_path: Path) -> None:
    check(goals.r9_malformed(tmp_path, n=0, subprocess_sample=0, wrong_typed="only"))


# --- the runner's goals (real `resumable run` processes) --------------------------------------

from . import runner_goals  # noqa: E402


def test_r7_dead_runner_releases_live_runner_keeps(tmp_path: Path) -> None:
    check(runner_goals.r7_runner_lock(tmp_path, trials=3))


def test_r8_timeouts_leave_no_survivors(tmp_path: Path) -> None:
    # A generous timeout: all three levels must have started before it fires, even on a loaded
    # machine (the wall-time bound is checked by the full tier, not here).
    check(runner_goals.r8_timeouts(tmp_path, trials=4, parallel=4, timeout=4.0))


def test_r10_resume_reaps_leftover_group(tmp_path: Path) -> None:
    check(runner_goals.r10_resume_reaps(tmp_path, trials=3))


def test_r10_runners_killed_mid_step_while_reaping_and_after_starting(tmp_path: Path) -> None:
    check(runner_goals.r10_kill_loop(tmp_path, rounds=4))


# --- the guard's goal (real `resumable guard` processes) --------------------------------------

from . import guard_goals  # noqa: E402


def test_r12_guard_kills_never_overrun_max_passes_nor_overlap(tmp_path: Path) -> None:
    check(guard_goals.r12_guard_kills(tmp_path, invocations=40, kill_rate=0.3, max_passes=25))
