"""Repository-wide test configuration.

CI (``CI=true``) runs hypothesis derandomized, so a red CI run reproduces exactly; local runs
keep drawing fresh examples to find new failures. ``XDG_DATA_HOME`` points at a fresh temporary
folder, so a server a test starts without ``--data-dir`` (and any subprocess, which inherits the
environment) never touches the developer's own Innkeeper data.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="innkeeper-test-data-")
