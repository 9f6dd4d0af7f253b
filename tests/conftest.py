"""Suite-wide settings."""

from hypothesis import settings

# No per-example deadline: CI machines are shared and noisy, and these properties are about
# behaviour, never speed (speed is measured by benchmarks/, as ratios, never asserted here).
settings.register_profile("resumable", deadline=None)
settings.load_profile("resumable")

