"""Suite-wide settings."""

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: CI machines are shared and noisy, and these properties are about
# behaviour, never speed (speed is measured by benchmarks/, as ratios, never asserted here).
settings.register_profile("resumable", deadline=None)
settings.load_profile("resumable")

# A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored,
# and so would every runner a test starts: the tests that interrupt a runner with SIGINT (as Ctrl-C
# does) would then wait for nothing. Give this process, and so its children, SIGINT's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Nothing a test runs writes into the real user's state directory (`~/.local/state/resumable`:
# worker step logs, guard state): every process of the suite, and every process it starts, gets a
# state directory of its own, removed at the end. The real one is remembered for the test that
# checks it stays untouched.
REAL_STATE_HOME = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
_SUITE_STATE = tempfile.mkdtemp(prefix="resumable-tests-state-")
os.environ["XDG_STATE_HOME"] = _SUITE_STATE


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SUITE_STATE, ignore_errors=True)


@pytest.fixture
def real_state_home() -> Path:
    """The state directory of the user running the suite (never written by it)."""
    return Path(REAL_STATE_HOME)


@pytest.fixture
def suite_state_home() -> Path:
    """The state directory every process of the suite writes to instead."""
    return Path(_SUITE_STATE)
