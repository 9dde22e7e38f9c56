"""``python -m cuzarr.cli``: the command line, as ``python -m cuzarr`` and ``cuzarr``."""

import sys

from cuzarr.cli import main

sys.exit(main())
