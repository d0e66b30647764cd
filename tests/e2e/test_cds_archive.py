"""The class-data archive of ``make install`` (mvsink/spark/cds.py) is what a spark-submit write step's driver maps its
Spark and Delta classes from, and not once ``MVSINK_SPARK_CDS=false``: the JVM's own class-loading log says where
each class came from."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from mvsink.spark import cds
from tests.support.cli import run_cli_process
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.slow

FROM_ARCHIVE = "source: shared objects file (top)"  # a class of the dynamic archive (the JDK's own: without "(top)")


@pytest.fixture(scope="module")
def archive():
    """The archive, made by make install's command (a no-op where make install made it)."""
    subprocess.run([sys.executable, "-m", "mvsink.write.cdsarchive", "--quiet"], check=True, timeout=600)
    path = cds.archive_path()
    assert path is not None and path.is_file()
    return path


def test_a_spark_submit_driver_maps_its_classes_from_the_archive(archive, env, tmp_path):
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(5), 0, 40), BASE)
    write_at(orders, make_orders(random.Random(6), 100, 5), BASE + HOUR)
    log = tmp_path / "classes.log"
    write_view(
        views,
        "proj",
        query=PROJECT,
        sources={"orders": "orders"},
        target="views/proj",
        as_of=BASE,
        spark_conf={"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={log}"},
    )
    run_cli_process(views, "refresh", "proj", "--at", str(BASE + 1), timeout=300)
    lines = log.read_text().splitlines()
    mapped = [x for x in lines if FROM_ARCHIVE in x]
    assert len(mapped) > 5000, (len(mapped), len(lines))
    assert any(" org.apache.spark.sql.delta." in x for x in mapped)
    assert any(" org.apache.spark.sql.catalyst." in x for x in mapped)

    log.unlink()
    # (on Spark: the first build kept the plan facts that would refresh this small change without a JVM)
    run_cli_process(
        views,
        "refresh",
        "proj",
        "--at",
        str(BASE + HOUR + 1),
        env_extra={"MVSINK_SPARK_CDS": "false", "MVSINK_SPARK_FREE": "false"},
    )
    lines = log.read_text().splitlines()
    assert lines and not [x for x in lines if FROM_ARCHIVE in x]
    assert any(" org.apache.spark.sql.delta." in x for x in lines)  # (loaded from the jars instead)
