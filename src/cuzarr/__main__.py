"""``python -m cuzarr``: the command line (see :mod:`cuzarr.cli`)."""

import sys

from cuzarr.cli import main

sys.exit(main())
