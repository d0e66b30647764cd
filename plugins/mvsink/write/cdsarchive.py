"""Building the class-data sharing archive of the Spark driver JVM (:mod:`mvsink.spark.cds`): ``make install`` runs
``python -m mvsink.write.cdsarchive``; run it again after changing the JDK, pyspark or the jars (``--force`` rebuilds).

The archive holds the classes a driver loaded during a real write step: one refresh of a small join-and-aggregate
view over two Delta tables through spark-submit, its JVM told to archive them at exit (about 50 s, 180 MB).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from mvsink import settings
from mvsink.spark.cds import QUIET, archive_path

log = logging.getLogger(__name__)

_VIEW = """\
name: cds
query: >
  SELECT c.region, count(*) AS orders, sum(o.amount) AS amount
  FROM orders o JOIN customers c ON o.customer = c.id
  WHERE o.amount > 0 GROUP BY c.region
sources: {orders: orders, customers: customers}
target: views/cds
as_of: 1767225600000
key: [region]
"""


def build(path: Path) -> None:
    """Make the archive at ``path`` (a refresh of a small join-and-aggregate view through spark-submit, its JVM
    archiving the classes it loaded). Sets this process's data root: it is the command's own process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mvsink-cds-") as tmp:
        partial = Path(tmp) / "driver.jsa"
        _archive_refresh(Path(tmp), f"-XX:ArchiveClassesAtExit={partial} {QUIET}")
        if not partial.is_file():
            raise RuntimeError(f"the JVM wrote no class-data archive at {partial}")
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(partial, staged)
        os.replace(staged, path)  # (readers see the whole archive or none)
    for old in path.parent.glob("driver-*.jsa"):  # archives of an earlier JVM or jar set
        if old != path:
            old.unlink(missing_ok=True)


def _archive_refresh(root: Path, java_options: str) -> None:
    """One refresh of :data:`_VIEW` over two small Delta tables under ``root``, through spark-submit."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from mvsink.definitions.viewfile import load_view_file
    from mvsink.write.runners import refresh

    data, views = root / "data", root / "views"
    views.mkdir()
    write_deltalake(
        str(data / "orders"),
        pa.table({"id": list(range(20)), "customer": [i % 5 for i in range(20)], "amount": list(range(20))}),
    )
    write_deltalake(str(data / "customers"), pa.table({"id": list(range(5)), "region": ["n", "s", "e", "w", "n"]}))
    (views / "cds.yaml").write_text(_VIEW)
    settings.export(settings.DATA_ROOT, str(data))  # (the job's process loads the view file with it)
    view = load_view_file(views / "cds.yaml", data_root=data)
    refresh(view, int(time.time() * 1000), spark_conf={"spark.driver.extraJavaOptions": java_options})


def main(argv: list[str] | None = None) -> int:
    """``python -m mvsink.write.cdsarchive [--force] [--quiet]``: build the archive unless it exists (``make install``
    runs this)."""
    parser = argparse.ArgumentParser(prog="python -m mvsink.write.cdsarchive", description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build it again even if it exists")
    parser.add_argument("--quiet", action="store_true", help="say nothing when it exists already")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    t0 = time.monotonic()
    path = archive_path()
    if path is None:
        log.warning("no class-data archive: java or pyspark not found")
        return 1
    if path.is_file() and not args.force:
        if not args.quiet:
            print(f"class-data archive of the Spark driver: {path} (exists)")
        return 0
    print("building the class-data archive of the Spark driver (one small refresh through spark-submit, ~50 s)")
    build(path)
    print(
        f"class-data archive of the Spark driver: {path} ({path.stat().st_size / 1e6:.0f} MB, "
        f"{time.monotonic() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
