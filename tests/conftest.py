"""Suite-wide settings."""

import signal

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
