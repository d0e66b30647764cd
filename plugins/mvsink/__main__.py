import sys

from mvsink.cli.app import main

sys.exit(main())
