"""``python -m maslab.cli``: the same as the ``maslab`` command."""

import sys

from maslab.cli import main

sys.exit(main())
