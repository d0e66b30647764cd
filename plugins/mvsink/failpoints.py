"""Injectable fail points for crash and race tests.

``MVSINK_FAIL_POINTS`` holds a comma-separated list of ``POINT[@VIEW][:ACTION]`` items:
``POINT`` is one of :data:`POINTS`; ``@VIEW`` limits it to one view; ``ACTION`` is
``raise`` (default: raise :class:`InjectedFault`), ``exit`` (kill the process with
``os._exit(97)``) or ``compete`` (run a competing refresh of the same view and refresh
time to completion, then carry on: forces an upper mismatch) or ``sync`` (create
``$MVSINK_SYNC_DIR/<point>.ready`` and wait until ``<point>.go`` appears there: lets a test
hold two processes just before their commits and release them in a chosen order).
Point names in those files have ``:`` replaced by ``-``.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .errors import InjectedFault

ENV = "MVSINK_FAIL_POINTS"
POINTS = ("write:after_staging", "append:before_validate", "append:before_commit", "append:after_commit",
          "compact:before_commit")
SYNC_DIR_ENV = "MVSINK_SYNC_DIR"
SYNC_TIMEOUT_SECONDS = 300


def _armed(name: str, view: str | None) -> str | None:
    for item in (i.strip() for i in os.environ.get(ENV, "").split(",") if i.strip()):
        action = "raise"
        for a in ("exit", "compete", "raise", "sync"):
            if item.endswith(":" + a):
                item, action = item[: -len(a) - 1], a
                break
        point, _, only = item.partition("@")
        if point == name and (not only or only == view):
            return action
    return None


def failpoint(name: str, *, view: str | None = None, views_dir: str | None = None,
              refresh_time: int | None = None) -> None:
    """Raise, exit or compete if ``name`` is armed in the environment (for ``view``)."""
    action = _armed(name, view)
    if action is None:
        return
    if action == "exit":
        os._exit(97)
    if action == "sync":
        _sync(name)
        return
    if action == "compete" and view and views_dir and refresh_time is not None:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        subprocess.run([sys.executable, "-m", "mvsink", "refresh", view, "--at", str(refresh_time),
                        "--views-dir", views_dir, "--run-id", "injected-competitor"], env=env, check=True,
                       capture_output=True, text=True)
        return
    raise InjectedFault(f"injected fault at {name} ({ENV}={os.environ.get(ENV)})")


def _sync(name: str) -> None:
    import time
    from pathlib import Path

    folder = Path(os.environ[SYNC_DIR_ENV])
    stem = name.replace(":", "-")
    (folder / f"{stem}.ready").touch()
    deadline = time.monotonic() + SYNC_TIMEOUT_SECONDS
    while not (folder / f"{stem}.go").exists():
        if time.monotonic() > deadline:
            raise InjectedFault(f"fail point {name}: no {stem}.go in {folder} after {SYNC_TIMEOUT_SECONDS} s")
        time.sleep(0.02)
