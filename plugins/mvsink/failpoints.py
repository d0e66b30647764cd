"""Injectable fail points for crash tests.

``MVSINK_FAIL_POINTS`` holds a comma-separated list of point names, each optionally
suffixed ``:exit`` to kill the process (``os._exit(97)``) instead of raising.
"""

from __future__ import annotations

import os

from .errors import InjectedFault

ENV = "MVSINK_FAIL_POINTS"
POINTS = ("write:after_staging", "append:before_commit", "append:after_commit")


def failpoint(name: str) -> None:
    """Raise (or exit) if ``name`` is armed in the environment."""
    armed = os.environ.get(ENV, "")
    if not armed:
        return
    for item in (i.strip() for i in armed.split(",")):
        kill = item.endswith(":exit")
        point = item[: -len(":exit")] if kill else item
        if point == name:
            if kill:
                os._exit(97)
            raise InjectedFault(f"injected fault at {name} ({ENV}={armed})")
