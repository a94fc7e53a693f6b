"""Repository-wide test configuration.

CI (``CI=true``) runs hypothesis derandomized, so a red CI run reproduces exactly; local runs
keep drawing fresh examples to find new failures.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
