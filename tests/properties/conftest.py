"""Hypothesis profiles: ``ci`` (the default, few examples) and ``long`` (make fuzz).

``AGENTKEEL_HYPOTHESIS_PROFILE=long`` runs every property and state machine of this
folder with many more examples; a failure prints its seed and the shrunk example.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from postgres.fixtures import *  # noqa: F403

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("AGENTKEEL_HYPOTHESIS_PROFILE", "ci"))
