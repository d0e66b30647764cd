"""Finding spark-submit and the environment it runs in (no pyspark import)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from mvsink import settings
from mvsink.exceptions import MvSinkError


def pyspark_script(name: str) -> str | None:
    """The script ``name`` (``spark-submit``, ``spark-class``) of this interpreter's pyspark: beside
    ``sys.executable``, else in pyspark's own ``bin/``; None if neither has it."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    from importlib.util import find_spec

    spec = find_spec("pyspark")  # locates the package without importing it
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "bin" / name
        if bundled.exists():
            return str(bundled)
    return None


def spark_submit_binary() -> str:
    """spark-submit of this interpreter's pyspark: beside ``sys.executable``, else pyspark's own, else on PATH."""
    found = pyspark_script("spark-submit") or shutil.which("spark-submit")
    if not found:
        raise MvSinkError("spark-submit not found. Fix: install pyspark in this environment.")
    return found


def submit_env() -> dict[str, str]:
    """Environment of a spark-submit process: this process's, on loopback, with this Python, without SPARK_HOME."""
    env = settings.process_env()
    env.pop("SPARK_HOME", None)
    # pyspark sets SPARK_CONNECT_MODE_ENABLED (and may set SPARK_REMOTE) in this process once a Spark Connect
    # session was made here: inherited, the job's own classic session would turn into a Connect client
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(name, None)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = env.get("PYSPARK_PYTHON", sys.executable)
    env["PYSPARK_DRIVER_PYTHON"] = env.get("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env
