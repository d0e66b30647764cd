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


def refresh_without_server(
    views: str | Path, view: str, at: int, *, env_extra: dict[str, str], heavy: Iterable[str]
) -> tuple[dict[str, object], list[str]]:
    """``mvsink refresh <view> --at <at> --json`` in a new process through a Spark Connect address where nothing
    listens: its JSON result, and which of the ``heavy`` modules it imported (asserting it exited 0)."""
    import json

    script = (
        "import json, sys\n"
        "from mvsink.cli.app import main\n"
        f"code = main(['refresh', {view!r}, '--views-dir', {str(views)!r}, '--at', '{at}', '--json',"
        " '--remote', 'sc://127.0.0.1:9'])\n"
        f"heavy = sorted(m for m in {tuple(heavy)!r} if m in sys.modules)\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    env = {**os.environ, **env_extra}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    *printed, last = out.stdout.strip().splitlines()
    tail = json.loads(last)
    assert tail["code"] == 0, out.stderr
    return json.loads("\n".join(printed)), tail["heavy"]
