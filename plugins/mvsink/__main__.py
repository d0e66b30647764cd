"""``python -m mvsink``: the command line."""

from mvsink.cli.app import exit_now, main

exit_now(main())
