"""``python -m mvsink``: the command line."""

import sys

from mvsink.cli.app import main

sys.exit(main())
