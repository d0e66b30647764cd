"""Running a dev tool's servers in the foreground until Ctrl-C, ``docker stop`` or one of them exits."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable


def stop_on_signals() -> threading.Event:
    """An event that the next SIGINT (Ctrl-C) or SIGTERM (``docker stop``) sets, instead of raising."""
    stopping = threading.Event()

    def _stop(*_: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    return stopping


def run_until_stopped(
    stopping: threading.Event, running: Callable[[], bool], stop: Callable[[], None], *, what: str
) -> int:
    """Wait until ``stopping`` is set or ``running()`` turns false (a server exited), checking every second;
    then (also on an error) say so and ``stop()`` the servers. The tool's exit status: 0."""
    try:
        while not stopping.is_set() and running():
            time.sleep(1)
    finally:
        print(f"stopping {what} ...", flush=True)
        stop()
    return 0
