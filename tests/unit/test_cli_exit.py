"""The command line's process ends without the interpreter's teardown, yet as a normal exit would (cli/app.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit


def _run(code: str) -> subprocess.CompletedProcess[str]:
    plugins = str(Path(__file__).resolve().parents[2] / "plugins")
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {plugins!r})\n{code}"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_exit_handlers_run_the_output_is_flushed_and_the_status_kept() -> None:
    got = _run(
        "import atexit, logging\n"
        "from mvsink.cli.app import exit_now\n"
        "atexit.register(lambda: sys.stdout.write(' and the exit handler'))\n"
        "logging.basicConfig(stream=sys.stderr, format='%(message)s')\n"
        "logging.warning('logged')\n"
        "sys.stdout.write('buffered output')\n"
        "exit_now(3)\n"
        "sys.stdout.write('never')\n"
    )
    assert got.returncode == 3
    assert got.stdout == "buffered output and the exit handler"
    assert got.stderr == "logged\n"


def test_a_thread_still_running_gets_the_normal_exit_that_waits_for_it(tmp_path: Path) -> None:
    done = tmp_path / "done"
    got = _run(
        "import threading, time\n"
        "from mvsink.cli.app import exit_now\n"
        f"threading.Thread(target=lambda: (time.sleep(0.3), open({str(done)!r}, 'w').close())).start()\n"
        "exit_now(0)\n"
    )
    assert got.returncode == 0 and done.exists()


def test_a_profiled_command_gets_the_normal_exit_so_the_profile_is_written(tmp_path: Path) -> None:
    import os

    out, script = tmp_path / "prof", tmp_path / "cmd.py"
    script.write_text("from mvsink.cli.app import exit_now\n\nexit_now(0)\n")
    plugins = str(Path(__file__).resolve().parents[2] / "plugins")
    got = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": plugins},
    )
    assert got.returncode == 0 and out.exists(), got.stderr
