"""Hypothesis profiles for the property-based tests of the readers.

In CI (``CI`` set) the examples are derandomized: every run tries the same inputs, so a
failure is reproducible from the log and a green run means the same thing twice. Locally they
are random, so new inputs keep being tried. No example database is written (nothing is left
behind in the checkout) and there is no per-example deadline (the machines are shared).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "servelab-ci", derandomize=True, database=None, deadline=None, max_examples=150,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "servelab-dev", database=None, deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("servelab-ci" if os.environ.get("CI") else "servelab-dev")
