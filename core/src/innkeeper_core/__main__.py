"""``python -m innkeeper_core`` runs the ``innkeeper`` command."""

import sys

from innkeeper_core.cli import main

sys.exit(main())
