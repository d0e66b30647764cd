"""The ``mvsink`` command line as the tests call it: in a subprocess (as a user or a DAG task does) or in
this process (to read what it prints)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

CLI = [sys.executable, "-m", "mvsink"]


def run_cli_process(
    views: str | Path,
    *args: str,
    env_extra: dict[str, str] | None = None,
    unset: Iterable[str] = (),
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m mvsink ARGS --views-dir VIEWS`` with this environment plus ``env_extra``, less ``unset``."""
    env = {k: v for k, v in os.environ.items() if k not in set(unset)}
    env.update(env_extra or {})
    proc = subprocess.run(
        [*CLI, *args, "--views-dir", str(views)], capture_output=True, text=True, env=env, timeout=timeout
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def run_cli_inprocess(views: str | Path, *args: str) -> str:
    """``mvsink ARGS --views-dir VIEWS`` run in this process; what it printed (it must succeed)."""
    from mvsink import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main([*args, "--views-dir", str(views)])
    assert rc == 0, out.getvalue()
    return out.getvalue()
