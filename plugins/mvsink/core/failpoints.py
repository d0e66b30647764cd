"""Injectable fail points for crash and race tests.

``MVSINK_FAIL_POINTS`` holds a comma-separated list of ``POINT[@VIEW][:ACTION]`` items:
``POINT`` is one of :data:`POINTS`; ``@VIEW`` limits it to one view; ``ACTION`` is
``raise`` (default: raise :class:`InjectedFault`), ``exit`` (kill the process with
``os._exit(97)``) or ``compete`` (run a competing refresh of the same view and refresh
time to completion, then carry on: forces an upper mismatch) or ``sync`` (create
``$MVSINK_SYNC_DIR/<point>.ready`` and wait until ``<point>.go`` appears there, ``<point>@<view>``
for an item limited to one view: lets a test
hold two processes just before their commits and release them in a chosen order; the
``.ready`` file holds the waiting process's pid, so a test can also ``kill -9`` it there).
Point names in those files have ``:`` replaced by ``-``.

A trailing ``:once`` (e.g. ``append:after_commit@v:exit:once``) fires the item only the first
time it is reached: it records ``<point>[@view].fired`` in ``$MVSINK_SYNC_DIR`` (required) before
acting, so an Airflow task retry, or a later refresh, passes the point.
"""

from __future__ import annotations

import os
import sys

from mvsink.exceptions import InjectedFault

ENV = "MVSINK_FAIL_POINTS"
POINTS = (
    "write:after_staging",
    "append:before_validate",
    "append:before_files_check",
    "append:before_commit",
    "append:after_commit",
    "compact:before_commit",
)
SYNC_DIR_ENV = "MVSINK_SYNC_DIR"
SYNC_TIMEOUT_SECONDS = 300


def _armed(name: str, view: str | None) -> tuple[str, str] | None:
    for item in (i.strip() for i in os.environ.get(ENV, "").split(",") if i.strip()):
        once = item.endswith(":once")
        if once:
            item = item[: -len(":once")]
        action = "raise"
        for a in ("exit", "compete", "raise", "sync"):
            if item.endswith(":" + a):
                item, action = item[: -len(a) - 1], a
                break
        point, _, only = item.partition("@")
        if point == name and (not only or only == view):
            if once and not _first_time(name, only):
                continue
            return action, only
    return None


def _first_time(name: str, only: str) -> bool:
    """True the first time a ``:once`` item fires (atomically records it in $MVSINK_SYNC_DIR)."""
    from pathlib import Path

    folder = Path(os.environ[SYNC_DIR_ENV])
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / (name.replace(":", "-") + (f"@{only}" if only else "") + ".fired")
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def failpoint(
    name: str, *, view: str | None = None, views_dir: str | None = None, refresh_time: int | None = None
) -> None:
    """Raise, exit or compete if ``name`` is armed in the environment (for ``view``)."""
    armed = _armed(name, view)
    if armed is None:
        return
    action, only = armed
    if action == "exit":
        os._exit(97)
    if action == "sync":
        _sync(name + (f"@{only}" if only else ""))
        return
    if action == "compete" and view and views_dir and refresh_time is not None:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        import subprocess

        subprocess.run(
            [
                sys.executable,
                "-m",
                "mvsink",
                "refresh",
                view,
                "--at",
                str(refresh_time),
                "--views-dir",
                views_dir,
                "--run-id",
                "injected-competitor",
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return
    raise InjectedFault(f"injected fault at {name} ({ENV}={os.environ.get(ENV)})")


def _sync(name: str) -> None:
    import time
    from pathlib import Path

    folder = Path(os.environ[SYNC_DIR_ENV])
    stem = name.replace(":", "-")
    ready = folder / f"{stem}.ready"
    tmp = folder / f".{stem}.ready.{os.getpid()}"
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, ready)
    deadline = time.monotonic() + SYNC_TIMEOUT_SECONDS
    while not (folder / f"{stem}.go").exists():
        if time.monotonic() > deadline:
            raise InjectedFault(f"fail point {name}: no {stem}.go in {folder} after {SYNC_TIMEOUT_SECONDS} s")
        time.sleep(0.02)
